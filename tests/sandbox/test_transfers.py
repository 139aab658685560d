"""The transfers service accepts first and finishes later: 202 `pending`, then `succeeded` or `failed`."""

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from settled.sandbox.truth import judge

from tests.sandbox.support import ThreadedSandbox, fault, records, requests, until

TRANSFER = {"destination": "acct-42", "amount": 25.5, "currency": "EUR"}
DEFAULTS = {"settle_after_s": 1.0, "fail_above": 10_000.0, "failure_reason": "insufficient_funds"}

Starter = Callable[[Path], AbstractContextManager[ThreadedSandbox]]


def settle(client: httpx.Client, **settings: Any) -> None:
    response = client.put("/_sandbox/transfers", json=settings)
    assert response.status_code == 200, response.text


def transfer(client: httpx.Client, key: str, **body: Any) -> httpx.Response:
    return client.post("/transfers", json={**TRANSFER, **body}, headers={"Idempotency-Key": key})


def final(client: httpx.Client, key: str) -> dict[str, Any]:
    """Poll the lookup by key until the transfer has left `pending`, with a deadline."""

    def probe() -> dict[str, Any] | None:
        found = client.get(f"/transfers/by-key/{key}").json()
        return found if found["status"] != "pending" else None

    return until(probe, what=f"transfer {key} to finish")


def test_create_answers_202_pending(client: httpx.Client) -> None:
    settle(client, settle_after_s=3600)

    response = transfer(client, "op-1", client_reference="op-1")

    assert response.status_code == 202
    assert response.json() == {
        "id": "t-1",
        "destination": "acct-42",
        "amount": 25.5,
        "currency": "EUR",
        "status": "pending",
        "failure_reason": None,
        "client_reference": "op-1",
    }
    assert client.get("/transfers/by-key/op-1").json() == response.json()
    assert client.get("/transfers/t-1").json() == response.json()


def test_a_transfer_succeeds_after_the_delay(client: httpx.Client) -> None:
    settle(client, settle_after_s=0.3)

    created = transfer(client, "op-1").json()

    assert created["status"] == "pending"
    assert final(client, "op-1") == {**created, "status": "succeeded"}
    assert client.get(f"/transfers/{created['id']}").json()["status"] == "succeeded"


def test_even_with_no_delay_the_create_answers_pending(client: httpx.Client) -> None:
    settle(client, settle_after_s=0)

    response = transfer(client, "op-1")

    assert (response.status_code, response.json()["status"]) == (202, "pending")
    assert client.get("/transfers/by-key/op-1").json()["status"] == "succeeded"


def test_an_amount_above_the_limit_fails_with_a_reason(client: httpx.Client) -> None:
    settle(client, settle_after_s=0.2, fail_above=100, failure_reason="account_closed")

    created = transfer(client, "op-1", amount=100.5)
    transfer(client, "op-2", amount=100)

    assert created.status_code == 202
    assert created.json()["status"] == "pending"
    assert final(client, "op-1") == {**created.json(), "status": "failed", "failure_reason": "account_closed"}
    assert final(client, "op-2")["status"] == "succeeded"


def test_the_outcome_is_fixed_when_the_transfer_commits(client: httpx.Client) -> None:
    settle(client, settle_after_s=0.2, fail_above=100)
    transfer(client, "op-1", amount=500)

    settle(client, settle_after_s=0.2)  # back to the defaults' limit: op-1 still fails

    assert final(client, "op-1")["failure_reason"] == "insufficient_funds"


def test_a_retry_is_replayed_without_a_second_transfer(client: httpx.Client) -> None:
    settle(client, settle_after_s=0)
    first = transfer(client, "op-1")

    again = transfer(client, "op-1")

    # The original answer, as the Idempotency-Key draft says, though the transfer has finished since.
    assert again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert len(records(client, service="transfers")) == 1
    assert [row["outcome"] for row in requests(client, key="op-1")] == ["applied", "replayed"]
    reused = transfer(client, "op-1", amount=30)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"


def test_a_transfer_requires_a_key(client: httpx.Client) -> None:
    response = client.post("/transfers", json=TRANSFER)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "idempotency_key_missing"
    assert records(client) == []


@pytest.mark.parametrize(
    "change", [{"amount": 0}, {"amount": "25"}, {"currency": "eur"}, {"destination": ""}]
)
def test_invalid_transfers_are_422_and_create_nothing(
    client: httpx.Client, change: dict[str, object]
) -> None:
    response = transfer(client, "op-1", **change)

    assert response.status_code == 422, response.text
    assert records(client) == []


def test_unknown_keys_and_ids_are_404(client: httpx.Client) -> None:
    transfer(client, "op-1")

    for path in ("/transfers/by-key/op-2", "/transfers/t-9", "/transfers/t-9/cancel"):
        response = client.request("POST" if path.endswith("cancel") else "GET", path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"


def test_a_pending_transfer_can_be_cancelled_and_then_never_finishes(client: httpx.Client) -> None:
    settle(client, settle_after_s=3600)
    transfer_id = transfer(client, "op-1").json()["id"]

    cancelled = client.post(f"/transfers/{transfer_id}/cancel")
    again = client.post(f"/transfers/{transfer_id}/cancel")

    assert cancelled.status_code == again.status_code == 200
    assert cancelled.json()["status"] == again.json()["status"] == "canceled"
    assert [row["outcome"] for row in requests(client, op="cancel")] == ["cancelled", "already_cancelled"]
    [row] = records(client, service="transfers")
    assert (row["status"], row["effective_at"]) == ("canceled", None)
    assert row["cancelled_at"] is not None
    assert client.post(f"/_sandbox/transfers/{transfer_id}/finish").status_code == 409
    assert client.get(f"/transfers/{transfer_id}").json()["status"] == "canceled"


def test_a_finished_transfer_cannot_be_cancelled(client: httpx.Client) -> None:
    settle(client, settle_after_s=0)
    transfer_id = transfer(client, "op-1").json()["id"]

    response = client.post(f"/transfers/{transfer_id}/cancel")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "already_finished"
    assert client.get(f"/transfers/{transfer_id}").json()["status"] == "succeeded"


def test_the_control_plane_finishes_a_pending_transfer_now(client: httpx.Client) -> None:
    settle(client, settle_after_s=3600)
    ok, bad = transfer(client, "op-1").json()["id"], transfer(client, "op-2").json()["id"]

    done = client.post(f"/_sandbox/transfers/{ok}/finish")
    failed = client.post(f"/_sandbox/transfers/{bad}/finish", json={"failure_reason": "account_closed"})

    assert (done.status_code, done.json()["status"]) == (200, "succeeded")
    assert failed.json() == {**client.get("/transfers/by-key/op-2").json(), "status": "failed"}
    assert failed.json()["failure_reason"] == "account_closed"
    assert client.post(f"/_sandbox/transfers/{ok}/finish").status_code == 409
    assert client.post("/_sandbox/transfers/t-9/finish").status_code == 404


def test_the_control_plane_can_override_the_decided_outcome(client: httpx.Client) -> None:
    settle(client, settle_after_s=3600, fail_above=1)
    first, second = transfer(client, "op-1").json()["id"], transfer(client, "op-2", amount=1).json()["id"]

    forced = client.post(f"/_sandbox/transfers/{first}/finish", json={"outcome": "succeeded"}).json()
    failed = client.post(f"/_sandbox/transfers/{second}/finish", json={"outcome": "failed"}).json()

    assert (forced["status"], forced["failure_reason"]) == ("succeeded", None)
    assert (failed["status"], failed["failure_reason"]) == ("failed", "insufficient_funds")
    both = {"outcome": "succeeded", "failure_reason": "x"}
    assert client.post(f"/_sandbox/transfers/{first}/finish", json=both).status_code == 422


def test_settings_default_and_reset_restores_them(client: httpx.Client) -> None:
    assert client.get("/_sandbox/transfers").json() == DEFAULTS
    settle(client, settle_after_s=0.5)
    assert client.get("/_sandbox/transfers").json() == {**DEFAULTS, "settle_after_s": 0.5}
    assert client.put("/_sandbox/transfers", json={"settle_after_s": -1}).status_code == 422
    assert client.put("/_sandbox/transfers", json={"delay": 1}).status_code == 422

    client.post("/_sandbox/reset")

    assert client.get("/_sandbox/transfers").json() == DEFAULTS


def test_faults_apply_to_transfers(client: httpx.Client) -> None:
    settle(client, settle_after_s=0)
    fault(client, service="transfers", op="create", mode="drop_after_apply", match_key="op-1")
    fault(client, service="transfers", op="lookup", mode="fail_before_apply", match_key="op-1")

    with pytest.raises(httpx.RemoteProtocolError):
        transfer(client, "op-1")

    assert [row["key"] for row in records(client, service="transfers")] == ["op-1"]
    assert client.get("/transfers/by-key/op-1").status_code == 503
    assert client.get("/transfers/by-key/op-1").json()["status"] == "succeeded"
    retry = transfer(client, "op-1")
    assert (retry.status_code, retry.headers["idempotent-replayed"]) == (202, "true")
    assert retry.json()["status"] == "pending"


def test_a_fault_before_applying_leaves_nothing_and_the_key_usable(client: httpx.Client) -> None:
    fault(client, service="transfers", op="create", mode="fail_before_apply", match_key="op-1")

    assert transfer(client, "op-1").status_code == 503
    assert records(client) == []
    assert transfer(client, "op-1").status_code == 202


def test_a_stale_lookup_shows_the_status_of_its_past(client: httpx.Client) -> None:
    settle(client, settle_after_s=3600)
    transfer_id = transfer(client, "op-1").json()["id"]
    fault(client, service="transfers", op="lookup", mode="stale", delay_s=1.0, match_key="op-1", count=0)
    until(lambda: client.get("/transfers/by-key/op-1").status_code == 200, what="the replica to see op-1")

    finished = client.post(f"/_sandbox/transfers/{transfer_id}/finish")
    assert finished.status_code == 200, finished.text
    stale = client.get("/transfers/by-key/op-1")

    # The replica, a second behind, has the transfer but not its finish.
    assert (stale.status_code, stale.json()["status"]) == (200, "pending")
    assert records(client, service="transfers")[0]["status"] == "succeeded"


def test_ground_truth_shows_when_a_transfer_took_effect(client: httpx.Client) -> None:
    settle(client, settle_after_s=0.2, fail_above=100)
    transfer(client, "op-ok")
    transfer(client, "op-bad", amount=500)
    settle(client, settle_after_s=3600)
    transfer(client, "op-pending")
    final(client, "op-ok")
    final(client, "op-bad")

    rows = {row["key"]: row for row in records(client, service="transfers")}

    assert rows["op-ok"]["status"] == "succeeded"
    assert rows["op-ok"]["effective_at"] == rows["op-ok"]["settles_at"]
    assert (rows["op-bad"]["status"], rows["op-bad"]["failure_reason"]) == ("failed", "insufficient_funds")
    assert rows["op-bad"]["effective_at"] is None
    assert (rows["op-pending"]["status"], rows["op-pending"]["effective_at"]) == ("pending", None)
    client.post("/bookings", json={"room": "Ada", "day": "Thursday"}, headers={"Idempotency-Key": "b"})
    [booking] = records(client, service="bookings")
    assert "effective_at" not in booking and "settles_at" not in booking


def test_the_judge_counts_a_transfer_done_only_once_it_succeeded(client: httpx.Client) -> None:
    settle(client, settle_after_s=0, fail_above=100)
    transfer(client, "op-ok")
    transfer(client, "op-bad", amount=500)
    settle(client, settle_after_s=3600)
    transfer(client, "op-pending")
    rows = records(client, service="transfers")

    verdict = judge(
        [],
        [
            {"operation_id": "op-ok", "state": "confirmed", "business_ref": "t-1"},
            {"operation_id": "op-bad", "state": "failed"},
            {"operation_id": "op-pending", "state": "confirmed", "business_ref": "t-3"},
        ],
        rows,
    )

    assert [(v.kind, v.operation_id) for v in verdict.violations] == [("final_mismatch", "op-pending")]


def test_transfers_finish_on_time_across_a_restart(tmp_path: Path, private_sandbox: Starter) -> None:
    db = tmp_path / "sandbox.sqlite3"
    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        settle(http, settle_after_s=0.5)
        assert transfer(http, "op-1").json()["status"] == "pending"
    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        # The settings are back to their defaults; the transfer keeps the time it was given.
        assert http.get("/_sandbox/transfers").json() == DEFAULTS
        assert final(http, "op-1")["status"] == "succeeded"


def test_an_old_data_dir_gains_the_transfer_columns(tmp_path: Path, private_sandbox: Starter) -> None:
    db = tmp_path / "sandbox.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE records (seq INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT NOT NULL,"
            " id TEXT NOT NULL, key TEXT, client_reference TEXT, payload TEXT NOT NULL, status TEXT NOT NULL,"
            " created_at TEXT NOT NULL, cancelled_at TEXT, committed_at TEXT, UNIQUE (service, id))"
        )
    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        settle(http, settle_after_s=0)
        assert transfer(http, "op-1").status_code == 202
        assert http.get("/transfers/by-key/op-1").json()["status"] == "succeeded"
