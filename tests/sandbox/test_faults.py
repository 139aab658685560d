"""Injected faults: each mode, the matching rules, and the control plane that manages them."""

import time

import httpx
import pytest

from tests.sandbox.support import Background, fault, records, requests, until, wait_outcome

BOOKING = {"room": "Ada", "day": "Thursday"}
REFUND = {"order_id": "o-1", "amount": 10, "currency": "EUR"}


def book(client: httpx.Client, key: str, timeout: float = 5) -> httpx.Response:
    return client.post("/bookings", json=BOOKING, headers={"Idempotency-Key": key}, timeout=timeout)


def last_request(client: httpx.Client, key: str, op: str = "create") -> dict[str, object]:
    return requests(client, key=key, op=op)[-1]


def test_a_fault_answers_with_its_id_and_resolved_defaults(client: httpx.Client) -> None:
    created = fault(client, service="refunds", op="create", mode="fail_before_apply", label="outage")

    assert created["id"] == "f-1"
    assert created["status"] == 503
    assert created["count"] == 1
    assert created["label"] == "outage"
    assert fault(client, service="bookings", op="create", mode="hang")["delay_s"] == 3600
    assert fault(client, service="bookings", op="create", mode="hold")["apply"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"service": "payments", "op": "create", "mode": "delay"},
        {"service": "bookings", "op": "update", "mode": "delay"},
        {"service": "bookings", "op": "create", "mode": "explode"},
        {"service": "bookings", "op": "create", "mode": "delay", "count": -1},
        {"service": "bookings", "op": "create", "mode": "delay", "key": "op-1"},
    ],
)
def test_an_invalid_fault_is_422(client: httpx.Client, body: dict[str, object]) -> None:
    response = client.post("/_sandbox/faults", json=body)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_drop_after_apply_breaks_the_connection_after_committing(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="drop_after_apply", match_key="op-1")

    with pytest.raises(httpx.RemoteProtocolError):
        book(client, "op-1")

    [record] = records(client)
    assert record["key"] == "op-1"
    assert last_request(client, "op-1")["outcome"] == "fault:drop_after_apply"
    retry = book(client, "op-1")
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == record["id"]


def test_drop_after_apply_without_a_key_still_applies(client: httpx.Client) -> None:
    fault(client, service="refunds", op="create", mode="drop_after_apply")

    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/refunds", json=REFUND)

    assert len(records(client, service="refunds")) == 1


def test_fail_before_apply_answers_503_and_applies_nothing(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply")

    response = book(client, "op-1")

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert records(client) == []
    assert last_request(client, "op-1")["outcome"] == "fault:fail_before_apply"


def test_fail_before_apply_with_a_chosen_status(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply", status=429)

    assert book(client, "op-1").status_code == 429


def test_error_after_apply_answers_500_but_the_record_exists(client: httpx.Client) -> None:
    fault(client, service="refunds", op="create", mode="error_after_apply")

    response = client.post("/refunds", json=REFUND)

    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert len(records(client, service="refunds")) == 1


def test_hang_without_apply_ends_with_the_clients_timeout(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="hang", match_key="op-1")

    with pytest.raises(httpx.ReadTimeout):
        book(client, "op-1", timeout=0.3)

    assert records(client) == []
    # The server noticed the client leave: the request is over and the key is free again.
    until(lambda: last_request(client, "op-1")["state"] == "done", what="the hung request to end")
    assert last_request(client, "op-1")["outcome"] == "fault:hang"
    assert book(client, "op-1").status_code == 201


def test_hang_with_apply_commits_then_never_answers(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="hang", apply=True, match_key="op-1")

    with pytest.raises(httpx.ReadTimeout):
        book(client, "op-1", timeout=0.3)

    assert len(records(client)) == 1
    assert book(client, "op-1").headers["idempotent-replayed"] == "true"


def test_a_hang_that_runs_out_drops_the_connection(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="hang", delay_s=0.1)

    with pytest.raises(httpx.RemoteProtocolError):
        book(client, "op-1")


def test_hold_waits_for_release_then_applies(client: httpx.Client, background: Background) -> None:
    hold = fault(client, service="bookings", op="create", mode="hold", match_key="op-1")
    pending = background.send(client, "POST", "/bookings", json=BOOKING, headers={"Idempotency-Key": "op-1"})

    held = wait_outcome(client, "op-1", "held")
    assert held["fault"] == hold["id"]
    assert records(client) == []
    assert client.get("/_sandbox/faults").json()["faults"][0]["held"] == 1

    released = client.post(f"/_sandbox/faults/{hold['id']}/release")
    assert released.json() == {"id": hold["id"], "released": 1}
    assert pending.result(5).status_code == 201
    assert len(records(client)) == 1
    assert last_request(client, "op-1")["outcome"] == "applied"


def test_hold_without_apply_answers_503_when_released(client: httpx.Client, background: Background) -> None:
    fault(client, service="bookings", op="create", mode="hold", apply=False, match_key="op-1")
    pending = background.send(client, "POST", "/bookings", json=BOOKING, headers={"Idempotency-Key": "op-1"})
    wait_outcome(client, "op-1", "held")

    assert client.post("/_sandbox/faults/release-all").json() == {"released": 1}

    assert pending.result(5).status_code == 503
    assert records(client) == []
    assert book(client, "op-1").status_code == 201


def test_a_held_request_still_applies_after_its_client_gave_up(
    client: httpx.Client, background: Background
) -> None:
    hold = fault(client, service="bookings", op="create", mode="hold", match_key="op-1")
    pending = background.send(
        client, "POST", "/bookings", json=BOOKING, headers={"Idempotency-Key": "op-1"}, timeout=0.3
    )
    wait_outcome(client, "op-1", "held")
    with pytest.raises(httpx.ReadTimeout):
        pending.result(5)

    client.post(f"/_sandbox/faults/{hold['id']}/release")

    until(lambda: records(client), what="the released booking to be committed")
    assert last_request(client, "op-1")["outcome"] == "applied"


def test_clearing_faults_lets_held_requests_proceed(client: httpx.Client, background: Background) -> None:
    fault(client, service="bookings", op="create", mode="hold", apply=False, match_key="op-1")
    pending = background.send(client, "POST", "/bookings", json=BOOKING, headers={"Idempotency-Key": "op-1"})
    wait_outcome(client, "op-1", "held")

    assert client.delete("/_sandbox/faults").json() == {"cleared": 1, "released": 1}

    assert pending.result(5).status_code == 201
    assert client.get("/_sandbox/faults").json() == {"faults": []}


def test_releasing_an_unknown_fault_is_404(client: httpx.Client) -> None:
    response = client.post("/_sandbox/faults/f-404/release")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_reject_answers_422_without_applying(client: httpx.Client) -> None:
    fault(client, service="refunds", op="create", mode="reject")

    response = client.post("/refunds", json=REFUND)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "rejected_by_fault"
    assert records(client) == []


def test_delay_answers_normally_after_the_delay(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="delay", delay_s=0.2)

    started = time.monotonic()
    response = book(client, "op-1")

    assert time.monotonic() - started >= 0.19  # timers may fire a hair early
    assert response.status_code == 201
    assert last_request(client, "op-1")["outcome"] == "applied"


def test_a_fault_fires_count_times_then_retires(client: httpx.Client) -> None:
    created = fault(client, service="bookings", op="create", mode="fail_before_apply", count=2)

    assert [book(client, f"op-{n}").status_code for n in range(3)] == [503, 503, 201]
    assert client.get("/_sandbox/faults").json() == {"faults": []}
    assert created["remaining"] == 2


def test_count_zero_fires_until_cleared(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply", count=0)

    assert [book(client, f"op-{n}").status_code for n in range(4)] == [503] * 4
    [listed] = client.get("/_sandbox/faults").json()["faults"]
    assert listed["fired"] == 4
    assert listed["remaining"] is None
    client.delete("/_sandbox/faults")
    assert book(client, "op-9").status_code == 201


def test_match_key_limits_a_fault_to_one_operation(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply", match_key="op-2")

    assert book(client, "op-1").status_code == 201
    assert book(client, "op-2").status_code == 503


def test_match_key_also_matches_the_client_reference(client: httpx.Client) -> None:
    fault(client, service="refunds", op="create", mode="fail_before_apply", match_key="ref-1")

    response = client.post("/refunds", json={**REFUND, "client_reference": "ref-1"})

    assert response.status_code == 503


def test_faults_apply_in_insertion_order(client: httpx.Client) -> None:
    fault(client, service="bookings", op="create", mode="fail_before_apply", status=502)
    fault(client, service="bookings", op="create", mode="fail_before_apply", status=504)

    assert [book(client, f"op-{n}").status_code for n in range(3)] == [502, 504, 201]


def test_a_fault_only_hits_its_service_and_op(client: httpx.Client) -> None:
    fault(client, service="refunds", op="create", mode="fail_before_apply", count=0)
    fault(client, service="bookings", op="lookup", mode="fail_before_apply", count=0)

    assert book(client, "op-1").status_code == 201


def test_lookup_faults_make_lookups_inconclusive(client: httpx.Client) -> None:
    book(client, "op-1")
    fault(client, service="bookings", op="lookup", mode="fail_before_apply", count=0)

    assert client.get("/bookings/by-key/op-1").status_code == 503
    assert client.get("/bookings/b-1").status_code == 503
    assert last_request(client, "op-1", op="lookup")["outcome"] == "fault:fail_before_apply"


def test_a_lookup_fault_can_target_one_key(client: httpx.Client) -> None:
    fault(client, service="refunds", op="lookup", mode="drop_after_apply", match_key="op-2", count=0)

    assert client.get("/refunds/by-key/op-1").status_code == 404
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/refunds/by-key/op-2")


def test_a_held_lookup_answers_from_the_state_at_release(
    client: httpx.Client, background: Background
) -> None:
    fault(client, service="bookings", op="lookup", mode="hold", match_key="op-1")
    lookup = background.send(client, "GET", "/bookings/by-key/op-1")
    wait_outcome(client, "op-1", "held", op="lookup")

    book(client, "op-1")
    client.post("/_sandbox/faults/release-all")

    assert lookup.result(5).status_code == 200


def test_cancel_faults_match_the_bookings_key(client: httpx.Client) -> None:
    booking_id = book(client, "op-1").json()["id"]
    fault(client, service="bookings", op="cancel", mode="error_after_apply", match_key="op-1")

    response = client.post(f"/bookings/{booking_id}/cancel")

    assert response.status_code == 500
    assert records(client)[0]["status"] == "cancelled"
    assert client.post(f"/bookings/{booking_id}/cancel").status_code == 200


def test_cancel_fail_before_apply_leaves_the_booking(client: httpx.Client) -> None:
    booking_id = book(client, "op-1").json()["id"]
    fault(client, service="bookings", op="cancel", mode="fail_before_apply")

    assert client.post(f"/bookings/{booking_id}/cancel").status_code == 503
    assert records(client)[0]["status"] == "booked"


def test_replays_and_conflicts_are_answered_before_any_fault(client: httpx.Client) -> None:
    book(client, "op-1")
    fault(client, service="bookings", op="create", mode="fail_before_apply", match_key="op-1")

    assert book(client, "op-1").headers["idempotent-replayed"] == "true"
    [listed] = client.get("/_sandbox/faults").json()["faults"]
    assert listed["fired"] == 0


# -- a service as unkind as real ones: writes that land late, lookups that lag ------------------------


def test_an_unseen_held_write_is_404_to_lookups_until_it_commits_after_its_client_gave_up(
    client: httpx.Client, background: Background
) -> None:
    hold = fault(client, service="refunds", op="create", mode="hold", unseen=True, match_key="r-late")
    assert hold["unseen"] is True
    gave_up = background.send(
        client, "POST", "/refunds", json={**REFUND, "client_reference": "r-late"}, timeout=0.3
    )
    wait_outcome(client, "r-late", "held")
    with pytest.raises(httpx.ReadTimeout):
        gave_up.result(5)

    # The write is still on its way in, yet the lookup says "not found": a 404 here is not proof.
    assert client.get("/refunds/by-key/r-late").status_code == 404
    client.post(f"/_sandbox/faults/{hold['id']}/release")
    until(lambda: records(client, service="refunds") or None, what="the late commit")
    assert client.get("/refunds/by-key/r-late").status_code == 200


def test_a_held_write_that_lookups_can_see_is_409_in_progress(
    client: httpx.Client, background: Background
) -> None:
    fault(client, service="refunds", op="create", mode="hold", match_key="r-seen")
    background.send(client, "POST", "/refunds", json={**REFUND, "client_reference": "r-seen"}, timeout=0.3)
    wait_outcome(client, "r-seen", "held")
    assert client.get("/refunds/by-key/r-seen").status_code == 409
    client.post("/_sandbox/faults/release-all")


def test_a_stale_lookup_misses_a_fresh_write_that_stands(client: httpx.Client) -> None:
    assert book(client, "b-fresh").status_code == 201
    stale = fault(client, service="bookings", op="lookup", mode="stale", delay_s=60, match_key="b-fresh")
    assert stale["delay_s"] == 60

    missed = client.get("/bookings/by-key/b-fresh")
    assert missed.status_code == 404 and len(records(client)) == 1
    assert client.get("/bookings/by-key/b-fresh").status_code == 200  # the fault fired once


def test_a_stale_lookup_sees_what_committed_before_its_lag(client: httpx.Client) -> None:
    assert book(client, "b-old").status_code == 201
    fault(client, service="bookings", op="lookup", mode="stale", delay_s=0, match_key="b-old")
    assert client.get("/bookings/by-key/b-old").status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"service": "bookings", "op": "create", "mode": "stale"},
        {"service": "bookings", "op": "lookup", "mode": "delay", "unseen": True},
        {"service": "bookings", "op": "create", "mode": "drop_after_apply", "unseen": True},
    ],
)
def test_stale_and_unseen_refuse_what_they_do_not_fit(client: httpx.Client, body: dict[str, object]) -> None:
    response = client.post("/_sandbox/faults", json=body)
    assert response.status_code == 422, response.text
