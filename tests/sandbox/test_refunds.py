"""The refunds service: the Idempotency-Key is optional, and without it nothing is deduplicated."""

import httpx
import pytest

from tests.sandbox.support import records

REFUND = {"order_id": "o-1001", "amount": 25.5, "currency": "EUR"}


def test_create_answers_the_new_refund(client: httpx.Client) -> None:
    response = client.post(
        "/refunds", json={**REFUND, "client_reference": "op-1"}, headers={"Idempotency-Key": "op-1"}
    )

    assert response.status_code == 201
    assert response.json() == {
        "id": "r-1",
        "order_id": "o-1001",
        "amount": 25.5,
        "currency": "EUR",
        "status": "refunded",
        "client_reference": "op-1",
    }


def test_with_a_key_a_retry_is_replayed(client: httpx.Client) -> None:
    first = client.post("/refunds", json=REFUND, headers={"Idempotency-Key": "op-1"})
    again = client.post("/refunds", json=REFUND, headers={"Idempotency-Key": "op-1"})

    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert len(records(client, service="refunds")) == 1


def test_without_a_key_every_request_creates_a_refund(client: httpx.Client) -> None:
    body = {**REFUND, "client_reference": "op-1"}

    first = client.post("/refunds", json=body)
    second = client.post("/refunds", json=body)

    assert first.status_code == second.status_code == 201
    assert [first.json()["id"], second.json()["id"]] == ["r-1", "r-2"]
    assert "idempotent-replayed" not in second.headers
    assert [row["key"] for row in records(client, service="refunds")] == [None, None]


def test_lookup_by_client_reference_finds_the_first_of_duplicates(client: httpx.Client) -> None:
    body = {**REFUND, "client_reference": "op-1"}
    first = client.post("/refunds", json=body).json()
    client.post("/refunds", json=body)

    response = client.get("/refunds/by-key/op-1")

    assert response.status_code == 200
    assert response.json() == first


def test_lookup_by_key_and_by_id(client: httpx.Client) -> None:
    created = client.post("/refunds", json=REFUND, headers={"Idempotency-Key": "op-1"}).json()

    assert client.get("/refunds/by-key/op-1").json() == created
    assert client.get(f"/refunds/{created['id']}").json() == created
    assert client.get("/refunds/by-key/op-2").status_code == 404
    assert client.get("/refunds/r-9").status_code == 404


@pytest.mark.parametrize(
    "change",
    [
        {"amount": 0},
        {"amount": -3},
        {"amount": "25.5"},
        {"amount": True},
        {"currency": "EURO"},
        {"currency": "eur"},
        {"order_id": ""},
        {"order_id": None},
    ],
)
def test_invalid_refunds_are_422_and_create_nothing(client: httpx.Client, change: dict[str, object]) -> None:
    response = client.post("/refunds", json={**REFUND, **change}, headers={"Idempotency-Key": "op-1"})

    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert records(client) == []


def test_an_integer_amount_is_a_number(client: httpx.Client) -> None:
    response = client.post("/refunds", json={**REFUND, "amount": 25})

    assert response.status_code == 201
    assert response.json()["amount"] == 25


def test_a_refund_cannot_be_cancelled(client: httpx.Client) -> None:
    refund_id = client.post("/refunds", json=REFUND).json()["id"]

    response = client.post(f"/refunds/{refund_id}/cancel", json={})

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_reversible"
    assert records(client)[0]["status"] == "refunded"


def test_cancelling_an_unknown_refund_is_404(client: httpx.Client) -> None:
    assert client.post("/refunds/r-7/cancel").status_code == 404
