"""Idempotency-Key semantics of the IETF httpapi draft: replay, reuse, in flight, failed first tries."""

import threading

import httpx

from tests.sandbox.support import Background, fault, records, requests, until, wait_outcome

BOOKING = {"room": "Ada", "day": "Thursday"}


def book(client: httpx.Client, key: str, body: dict[str, str] | None = None) -> httpx.Response:
    return client.post("/bookings", json=body or BOOKING, headers={"Idempotency-Key": key})


def test_a_retry_replays_the_stored_answer_without_a_second_record(client: httpx.Client) -> None:
    first = book(client, "op-1")
    again = book(client, "op-1")

    assert again.status_code == first.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert len(records(client)) == 1
    assert [row["outcome"] for row in requests(client, key="op-1")] == ["applied", "replayed"]


def test_the_body_compares_as_canonical_json(client: httpx.Client) -> None:
    book(client, "op-1", {"room": "Ada", "day": "Thursday"})
    spaced = b'{ "day" : "Thursday",\n  "room": "Ada" }'

    again = client.post(
        "/bookings", content=spaced, headers={"Idempotency-Key": "op-1", "content-type": "application/json"}
    )

    assert again.headers["idempotent-replayed"] == "true"


def test_a_replay_is_the_original_answer_even_after_a_cancel(client: httpx.Client) -> None:
    booking_id = book(client, "op-1").json()["id"]
    client.post(f"/bookings/{booking_id}/cancel")

    again = book(client, "op-1")

    assert again.json()["status"] == "booked"


def test_the_same_key_with_another_body_is_422(client: httpx.Client) -> None:
    book(client, "op-1")

    response = book(client, "op-1", {"room": "Grace", "day": "Thursday"})

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert len(records(client)) == 1


def test_keys_are_per_service(client: httpx.Client) -> None:
    book(client, "op-1")

    refund = client.post(
        "/refunds",
        json={"order_id": "o-1", "amount": 1, "currency": "EUR"},
        headers={"Idempotency-Key": "op-1"},
    )

    assert refund.status_code == 201
    assert "idempotent-replayed" not in refund.headers


def test_the_same_key_while_the_first_is_in_flight_is_409(
    client: httpx.Client, background: Background
) -> None:
    hold = fault(client, service="bookings", op="create", mode="hold", match_key="op-1")
    first = background.send(client, "POST", "/bookings", json=BOOKING, headers={"Idempotency-Key": "op-1"})
    wait_outcome(client, "op-1", "held")

    second = book(client, "op-1")
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "idempotency_key_in_flight"
    different = book(client, "op-1", {"room": "Grace", "day": "Friday"})
    assert different.status_code == 422

    client.post(f"/_sandbox/faults/{hold['id']}/release")
    assert first.result(5).status_code == 201
    assert book(client, "op-1").headers["idempotent-replayed"] == "true"
    assert len(records(client)) == 1


def test_a_request_that_failed_before_applying_leaves_the_key_usable(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply", match_key="op-1")

    assert book(client, "op-1").status_code == 503
    retry = book(client, "op-1")

    assert retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers
    assert len(records(client)) == 1


def test_a_retry_after_an_error_after_applying_replays_the_success(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="error_after_apply", match_key="op-1")

    assert book(client, "op-1").status_code == 500
    retry = book(client, "op-1")

    assert retry.status_code == 201
    assert retry.headers["idempotent-replayed"] == "true"
    assert len(records(client)) == 1


def test_concurrent_requests_with_one_key_make_one_record(
    client: httpx.Client, background: Background
) -> None:
    # A short delay keeps the first one in flight while the others arrive.
    fault(client, service="bookings", op="create", mode="delay", delay_s=0.3, match_key="op-1")
    start = threading.Barrier(6)

    def send() -> httpx.Response:
        start.wait()
        return book(client, "op-1")

    futures = [background.submit(send) for _ in range(6)]
    statuses = sorted(future.result(5).status_code for future in futures)

    assert statuses.count(201) == 1
    assert set(statuses) == {201, 409}
    assert len(records(client)) == 1


def test_a_lookup_while_the_write_is_in_flight_is_not_an_authoritative_404(
    client: httpx.Client, background: Background
) -> None:
    hold = fault(client, service="refunds", op="create", mode="hold", match_key="ref-9", apply=True)
    body = {"order_id": "o-9", "amount": 2, "currency": "EUR", "client_reference": "ref-9"}
    background.send(client, "POST", "/refunds", json=body)
    wait_outcome(client, "ref-9", "held")

    during = client.get("/refunds/by-key/ref-9")
    assert during.status_code == 409 and during.json()["error"]["code"] == "in_progress"

    client.post(f"/_sandbox/faults/{hold['id']}/release")
    assert until(lambda: client.get("/refunds/by-key/ref-9").status_code == 200, what="the refund")
    assert client.get("/refunds/by-key/nobody").status_code == 404
