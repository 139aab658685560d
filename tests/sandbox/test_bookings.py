"""The bookings service: a keyed create, lookups by id and by key, an idempotent cancel."""

import httpx

from tests.sandbox.support import records

BOOKING = {"room": "Ada", "day": "Thursday"}


def book(client: httpx.Client, key: str, **body: str) -> httpx.Response:
    return client.post("/bookings", json={**BOOKING, **body}, headers={"Idempotency-Key": key})


def test_create_answers_the_new_booking(client: httpx.Client) -> None:
    response = book(client, "op-1", client_reference="op-1")

    assert response.status_code == 201
    assert response.json() == {
        "id": "b-1",
        "room": "Ada",
        "day": "Thursday",
        "status": "booked",
        "client_reference": "op-1",
    }
    assert "idempotent-replayed" not in response.headers


def test_ids_count_up_per_service(client: httpx.Client) -> None:
    assert book(client, "op-1").json()["id"] == "b-1"
    assert book(client, "op-2").json()["id"] == "b-2"
    refund = {"order_id": "o-1", "amount": 5, "currency": "EUR"}
    assert client.post("/refunds", json=refund).json()["id"] == "r-1"


def test_create_without_key_is_refused_and_creates_nothing(client: httpx.Client) -> None:
    response = client.post("/bookings", json=BOOKING)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "idempotency_key_missing"
    assert response.json()["error"]["message"]
    assert records(client) == []


def test_create_with_an_empty_key_counts_as_missing(client: httpx.Client) -> None:
    response = client.post("/bookings", json=BOOKING, headers={"Idempotency-Key": ""})

    assert response.status_code == 400


def test_the_drafts_quoted_key_form_is_the_same_key(client: httpx.Client) -> None:
    first = book(client, '"op-q"')
    again = book(client, "op-q")

    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert client.get("/bookings/by-key/op-q").status_code == 200


def test_create_missing_fields_is_422(client: httpx.Client) -> None:
    response = client.post("/bookings", json={"room": "Ada"}, headers={"Idempotency-Key": "op-1"})

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [detail["loc"] for detail in error["details"]] == [["day"]]
    assert records(client) == []


def test_create_with_a_non_object_body_is_422(client: httpx.Client) -> None:
    headers = {"Idempotency-Key": "op-1", "content-type": "application/json"}

    assert client.post("/bookings", content=b"[1, 2]", headers=headers).status_code == 422
    assert client.post("/bookings", content=b"{not json", headers=headers).status_code == 422


def test_an_invalid_request_leaves_the_key_usable(client: httpx.Client) -> None:
    assert (
        client.post("/bookings", json={"room": "Ada"}, headers={"Idempotency-Key": "op-1"}).status_code == 422
    )

    assert book(client, "op-1").status_code == 201


def test_lookup_by_id(client: httpx.Client) -> None:
    created = book(client, "op-1").json()

    response = client.get(f"/bookings/{created['id']}")

    assert response.status_code == 200
    assert response.json() == created


def test_lookup_of_an_unknown_id_is_404(client: httpx.Client) -> None:
    response = client.get("/bookings/b-99")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_lookup_by_idempotency_key(client: httpx.Client) -> None:
    created = book(client, "op-1").json()

    response = client.get("/bookings/by-key/op-1")

    assert response.status_code == 200
    assert response.json() == created


def test_lookup_by_client_reference(client: httpx.Client) -> None:
    created = book(client, "key-a", client_reference="ref-a").json()

    assert client.get("/bookings/by-key/ref-a").json() == created


def test_lookup_of_a_key_never_used_is_404(client: httpx.Client) -> None:
    book(client, "op-1")

    response = client.get("/bookings/by-key/op-2")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_lookup_by_key_takes_keys_with_slashes(client: httpx.Client) -> None:
    book(client, "tenant/op-1")

    assert client.get("/bookings/by-key/tenant%2Fop-1").status_code == 200


def test_cancel_cancels_and_is_idempotent(client: httpx.Client) -> None:
    booking_id = book(client, "op-1").json()["id"]

    first = client.post(f"/bookings/{booking_id}/cancel", json={})
    again = client.post(f"/bookings/{booking_id}/cancel")

    assert first.status_code == again.status_code == 200
    assert first.json()["status"] == again.json()["status"] == "cancelled"
    assert client.get(f"/bookings/{booking_id}").json()["status"] == "cancelled"
    [record] = records(client)
    assert record["status"] == "cancelled"
    assert record["cancelled_at"] is not None


def test_cancel_of_an_unknown_booking_is_404(client: httpx.Client) -> None:
    response = client.post("/bookings/b-42/cancel")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_unknown_routes_answer_json_errors(client: httpx.Client) -> None:
    missing = client.get("/nowhere")
    wrong_method = client.delete("/bookings/b-1")

    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"
