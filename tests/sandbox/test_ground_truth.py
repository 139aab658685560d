"""The sandbox's ground truth (records, request log), reset, and persistence across restarts."""

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

import httpx

from tests.helpers import Sandbox
from tests.sandbox.support import ThreadedSandbox, fault, records, requests

BOOKING = {"room": "Ada", "day": "Thursday"}
REFUND = {"order_id": "o-1", "amount": 10.0, "currency": "EUR"}

Starter = Callable[[Path], AbstractContextManager[ThreadedSandbox]]


def book(client: httpx.Client, key: str, **body: str) -> httpx.Response:
    return client.post("/bookings", json={**BOOKING, **body}, headers={"Idempotency-Key": key})


def utc(stamp: str) -> datetime:
    assert stamp.endswith("Z") and len(stamp.split(".")[1]) == 7, stamp  # microseconds, then Z
    return datetime.fromisoformat(stamp)


def test_records_are_the_ground_truth_in_creation_order(client: httpx.Client) -> None:
    book(client, "op-1", client_reference="op-1")
    client.post("/refunds", json=REFUND)
    book(client, "op-2")

    rows = records(client)

    assert [(row["service"], row["id"]) for row in rows] == [
        ("bookings", "b-1"),
        ("refunds", "r-1"),
        ("bookings", "b-2"),
    ]
    assert rows[0] == {
        "service": "bookings",
        "id": "b-1",
        "key": "op-1",
        "client_reference": "op-1",
        "payload": {"room": "Ada", "day": "Thursday", "client_reference": "op-1"},
        "status": "booked",
        "created_at": rows[0]["created_at"],
        "committed_at": rows[0]["committed_at"],
        "cancelled_at": None,
    }
    assert utc(rows[0]["created_at"]) <= utc(rows[0]["committed_at"]) < utc(rows[1]["created_at"])
    assert rows[1]["key"] is None
    assert utc(rows[0]["created_at"]) < utc(rows[1]["created_at"]) < utc(rows[2]["created_at"])
    assert [row["id"] for row in records(client, service="refunds")] == ["r-1"]
    assert [row["id"] for row in records(client, service="bookings")] == ["b-1", "b-2"]


def test_the_request_log_has_every_business_request_in_arrival_order(client: httpx.Client) -> None:
    booking_id = book(client, "op-1", client_reference="ref-1").json()["id"]
    book(client, "op-1", client_reference="ref-1")
    client.get("/bookings/by-key/op-1")
    client.get("/bookings/by-key/op-9")
    client.post(f"/bookings/{booking_id}/cancel")
    client.post("/bookings", json=BOOKING)
    client.get("/_sandbox/records")  # the control plane is not logged

    rows = requests(client)

    assert [(row["seq"], row["op"], row["outcome"], row["status"]) for row in rows] == [
        (1, "create", "applied", 201),
        (2, "create", "replayed", 201),
        (3, "lookup", "found", 200),
        (4, "lookup", "not_found", 404),
        (5, "cancel", "cancelled", 200),
        (6, "create", "rejected", 400),
    ]
    first = rows[0]
    assert {k: first[k] for k in ("service", "method", "path", "key", "client_reference", "state")} == {
        "service": "bookings",
        "method": "POST",
        "path": "/bookings",
        "key": "op-1",
        "client_reference": "ref-1",
        "state": "done",
    }
    assert utc(first["received_at"]) <= utc(first["finished_at"])
    # Requests by id are logged with the record's key, so they can be found by operation.
    assert rows[4]["key"] == "op-1" and rows[4]["client_reference"] == "ref-1"
    assert rows[3]["key"] == "op-9"


def test_the_request_log_filters_by_service_and_op(client: httpx.Client) -> None:
    book(client, "op-1")
    client.post("/refunds", json=REFUND)
    client.get("/refunds/by-key/op-1")

    assert [row["op"] for row in requests(client, service="refunds")] == ["create", "lookup"]
    assert [row["service"] for row in requests(client, op="create")] == ["bookings", "refunds"]
    assert client.get("/_sandbox/requests", params={"op": "delete"}).status_code == 422


def test_reset_wipes_everything_and_restarts_the_ids(client: httpx.Client) -> None:
    book(client, "op-1")
    client.post("/refunds", json=REFUND)
    fault(client, service="bookings", op="create", mode="fail_before_apply", count=0)

    assert client.post("/_sandbox/reset").status_code == 200

    assert records(client) == []
    assert requests(client) == []
    assert client.get("/_sandbox/faults").json() == {"faults": []}
    again = book(client, "op-1")
    assert again.json()["id"] == "b-1"
    assert "idempotent-replayed" not in again.headers
    assert requests(client)[0]["seq"] == 1
    assert fault(client, service="bookings", op="create", mode="delay")["id"] == "f-1"


def test_records_and_keys_survive_a_restart(tmp_path: Path, private_sandbox: Starter) -> None:
    db = tmp_path / "sandbox.sqlite3"
    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        first = book(http, "op-1")
        http.post("/refunds", json=REFUND)

    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.get("/bookings/b-1").json() == first.json()
        replay = book(http, "op-1")
        assert replay.headers["idempotent-replayed"] == "true"
        assert book(http, "op-2").json()["id"] == "b-2"
        assert http.post("/refunds", json=REFUND).json()["id"] == "r-2"
        assert [row["outcome"] for row in requests(http, op="create")] == [
            "applied",
            "applied",
            "replayed",
        ] + ["applied"] * 2


def test_a_restart_frees_keys_a_dead_process_left_in_flight(tmp_path: Path, private_sandbox: Starter) -> None:
    db = tmp_path / "sandbox.sqlite3"
    with private_sandbox(db):
        pass
    # What a SIGKILL mid-request leaves behind: a claimed key and an unfinished log row.
    then = "2026-01-01T00:00:00.000000Z"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO idempotency (service, key, fingerprint, state, claim, created_at)"
            " VALUES ('bookings', 'op-1', '{}', 'in_flight', 'dead', ?)",
            (then,),
        )
        conn.execute(
            "INSERT INTO requests (service, op, method, path, key, received_at, state)"
            " VALUES ('bookings', 'create', 'POST', '/bookings', 'op-1', ?, 'in_flight')",
            (then,),
        )

    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert book(http, "op-1").status_code == 201
        assert requests(http)[0]["state"] == "done"
        assert requests(http)[0]["outcome"] == "interrupted"


def test_the_projects_test_helper_speaks_this_api(client: httpx.Client) -> None:
    helper = Sandbox(client)
    fault_id = helper.fault("bookings", "create", "fail_before_apply", "op-1", status=503)

    assert book(client, "op-1", client_reference="op-1").status_code == 503
    assert [row["outcome"] for row in helper.writes("op-1")] == ["fault:fail_before_apply"]
    helper.release(fault_id)
    assert book(client, "op-1", client_reference="op-1").status_code == 201
    assert [row["id"] for row in helper.records("op-1", service="bookings")] == ["b-1"]
    helper.clear_faults()


def test_an_old_data_dir_gains_commit_times(tmp_path: Path, private_sandbox: Starter) -> None:
    db = tmp_path / "sandbox.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE records (seq INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT NOT NULL,"
            " id TEXT NOT NULL, key TEXT, client_reference TEXT, payload TEXT NOT NULL, status TEXT NOT NULL,"
            " created_at TEXT NOT NULL, cancelled_at TEXT, UNIQUE (service, id))"
        )
    with private_sandbox(db) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert book(http, "op-1").status_code == 201
        (row,) = records(http)
        assert utc(row["created_at"]) <= utc(row["committed_at"])
