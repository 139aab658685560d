"""The action runner end to end: real Temporal, real worker process, real API, sandbox services.

Every test checks the sandbox's records (the ground truth) apart from what the API says.
"""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, states_seen, status, wait_for, wait_state

KINDS = [("room_booking", BOOKING, "bookings"), ("refund", REFUND, "refunds")]


def test_healthz_is_ok_with_a_polling_worker(api: httpx.Client) -> None:
    response = api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize(("kind", "params", "service"), KINDS)
def test_normal_call_is_confirmed_once_with_the_reference(
    api: httpx.Client, sandbox: Sandbox, kind: str, params: dict, service: str
) -> None:
    created = create(api, kind, params)
    assert created.status_code == 201, created.text
    action = created.json()
    op = action["operation_id"]
    assert (action["state"], action["authorized"], action["claim"]) == ("requested", False, "in_progress")
    assert "go-ahead" in action["say"]
    assert sandbox.records(op) == []  # nothing is sent before authorization

    authorized = api.post(f"/v1/actions/{op}/authorize", json={"by": "caller"}, params={"wait": 10})
    assert authorized.status_code == 200
    action = authorized.json()
    assert action["state"] == "confirmed"
    assert states_seen(action) == ["requested", "running", "confirmed"]
    records = sandbox.records(op, service)
    assert len(records) == 1
    assert action["business_ref"] == records[0]["id"]
    assert action["business_ref"] in action["say"]
    assert (action["claim"], action["attempts"], action["dispatched"]) == ("done", 1, True)


def test_cut_before_dispatch_then_cancelled_sends_nothing(api: httpx.Client, sandbox: Sandbox) -> None:
    op = create(api, "room_booking", BOOKING).json()["operation_id"]
    cancelled = api.post(f"/v1/actions/{op}/cancel", json={"by": "caller", "reason": "changed my mind"})
    assert cancelled.status_code == 200
    action = cancelled.json()
    assert (action["state"], action["dispatched"], action["claim"]) == ("cancelled", False, "not_done")
    assert api.post(f"/v1/actions/{op}/authorize").json()["state"] == "cancelled"  # a no-op, 200
    assert sandbox.records(op) == [] and sandbox.writes(op) == []


@pytest.mark.parametrize(("kind", "params", "service"), KINDS)
def test_applied_but_response_lost_is_unknown_then_confirmed_by_lookup(
    api: httpx.Client, sandbox: Sandbox, kind: str, params: dict, service: str
) -> None:
    op = new_id()
    sandbox.fault(service, "create", "drop_after_apply", op)
    create(api, kind, params, operation_id=op, authorized=True)
    action = wait_state(api, op, "confirmed")
    assert "unknown" in states_seen(action)
    assert len(sandbox.records(op, service)) == 1
    assert len(sandbox.writes(op)) == 1  # confirmed by the lookup: never a second write
    assert action["business_ref"] == sandbox.records(op, service)[0]["id"]


def test_not_applied_is_re_sent_with_the_same_key(api: httpx.Client, sandbox: Sandbox) -> None:
    op = new_id()
    sandbox.fault("bookings", "create", "fail_before_apply", op, status=503)
    create(api, "room_booking", BOOKING, operation_id=op, authorized=True)
    action = wait_state(api, op, "confirmed")
    assert states_seen(action) == ["requested", "running", "unknown", "running", "confirmed"]
    writes = sandbox.writes(op)
    assert len(writes) == 2 and {w["key"] for w in writes} == {op}
    assert len(sandbox.records(op)) == 1
    assert action["attempts"] == 2


def test_without_deduplication_an_inconclusive_lookup_never_re_sends(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    op = new_id()
    sandbox.fault("refunds", "create", "fail_before_apply", op, status=503)
    sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "refund_nodedup", REFUND, operation_id=op)
    action = wait_for(lambda: (s := status(api, op))["needs_attention"] and s, what="needs_attention")
    assert action["state"] == "unknown" and action["claim"] == "unknown"
    assert "haven't confirmed" in action["say"]
    assert len(sandbox.requests(op, op="lookup")) >= 2  # it kept checking ...
    assert len(sandbox.writes(op)) == 1  # ... and never re-sent
    assert sandbox.records(op) == []

    # Once the lookup can answer, it says "never applied": only then is the refund sent again.
    sandbox.clear_faults()
    api.post(f"/v1/actions/{op}/reconcile", params={"wait": 5})
    action = wait_state(api, op, "confirmed")
    assert len(sandbox.records(op)) == 1 and len(sandbox.writes(op)) == 2
    assert action["needs_attention"] is False


def test_cancel_in_flight_of_an_applied_booking_compensates(api: httpx.Client, sandbox: Sandbox) -> None:
    op = new_id()
    hold = sandbox.fault("bookings", "create", "hold", op, apply=True)
    create(api, "room_booking", BOOKING, operation_id=op, authorized=True)
    sandbox.wait_held(op)
    during = api.post(f"/v1/actions/{op}/cancel").json()
    assert during["state"] == "running" and during["cancel_requested"] is True
    assert "check before I can cancel" in during["say"]
    sandbox.release(hold)
    action = wait_state(api, op, "cancelled")
    assert action["compensated"] is True
    records = sandbox.records(op)
    assert len(records) == 1 and records[0]["status"] == "cancelled"
    assert action["business_ref"] == records[0]["id"]
    assert states_seen(action)[-2:] == ["confirmed", "cancelled"]


def test_cancel_in_flight_of_an_applied_refund_stays_confirmed_and_says_so(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    op = new_id()
    hold = sandbox.fault("refunds", "create", "hold", op, apply=True)
    create(api, "refund", REFUND, operation_id=op, authorized=True)
    sandbox.wait_held(op)
    api.post(f"/v1/actions/{op}/cancel")
    sandbox.release(hold)
    action = wait_state(api, op, "confirmed")
    assert action["cancel_requested"] is True and action["compensated"] is False
    assert "too late" in action["say"] and action["business_ref"] in action["say"]
    assert len(sandbox.records(op)) == 1  # the record stands, and the status does not say "cancelled"
    assert api.post(f"/v1/actions/{op}/cancel").status_code == 409


def test_same_operation_id_twice_concurrently_is_one_action(api: httpx.Client, sandbox: Sandbox) -> None:
    op, conversation = new_id(), new_id("conv")

    def send(_: int) -> httpx.Response:
        return create(
            api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation, authorized=True
        )

    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(send, range(4)))
    assert sorted(r.status_code for r in responses) == [200, 200, 200, 201]
    wait_state(api, op, "confirmed")
    again = send(0)
    assert again.status_code == 200 and again.json()["state"] == "confirmed"
    assert len(sandbox.records(op)) == 1 and len(sandbox.writes(op)) == 1

    other = create(
        api, "room_booking", {"room": "Ada", "day": "Friday"}, operation_id=op, conversation_id=conversation
    )
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "operation_conflict"
    assert status(api, op)["params"] == BOOKING


def test_amend_resets_authorization_and_is_refused_once_dispatched(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    op = create(api, "room_booking", BOOKING, authorized=True, operation_id=new_id()).json()["operation_id"]
    wait_state(api, op, "confirmed")
    refused = api.post(f"/v1/actions/{op}/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_amendable"

    held = new_id()
    hold = sandbox.fault("bookings", "create", "hold", held, apply=True)
    create(api, "room_booking", BOOKING, authorized=True, operation_id=held)
    sandbox.wait_held(held)
    refused = api.post(f"/v1/actions/{held}/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "already_dispatched"
    sandbox.release(hold)

    fresh = create(api, "room_booking", BOOKING).json()["operation_id"]
    amended = api.post(f"/v1/actions/{fresh}/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    assert amended.status_code == 200 and amended.json()["params"]["day"] == "Friday"
    bad = api.post(f"/v1/actions/{fresh}/amend", json={"params": {"room": "Ada"}})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_params"
    confirmed = api.post(f"/v1/actions/{fresh}/authorize", params={"wait": 10}).json()
    assert confirmed["state"] == "confirmed"
    assert sandbox.records(fresh)[0]["payload"]["day"] == "Friday"


@pytest.mark.parametrize(
    ("body", "status_code", "code", "names"),
    [
        ({"conversation_id": "c-1", "kind": "teleport", "params": {}}, 422, "unknown_kind", "teleport"),
        (
            {"conversation_id": "c-1", "kind": "refund", "params": {**REFUND, "amount": -3}},
            422,
            "invalid_params",
            "params.amount",
        ),
        (
            {"conversation_id": "c-1", "kind": "room_booking", "params": {"room": "Ada"}},
            422,
            "invalid_params",
            "params.day",
        ),
        (
            {"conversation_id": "c 1/../x", "kind": "refund", "params": REFUND},
            422,
            "invalid_request",
            "conversation_id",
        ),
        (
            {"conversation_id": "c-1", "kind": "refund", "params": REFUND, "operation_id": "x" * 129},
            422,
            "invalid_request",
            "operation_id",
        ),
        ({"conversation_id": "c-1", "kind": "refund", "params": "nope"}, 422, "invalid_request", "params"),
    ],
)
def test_bad_input_is_a_clear_4xx_and_records_nothing(
    api: httpx.Client, sandbox: Sandbox, body: dict, status_code: int, code: str, names: str
) -> None:
    op = new_id()
    response = api.post("/v1/actions", json={"operation_id": op, **body})
    assert response.status_code == status_code, response.text
    error = response.json()["error"]
    assert error["code"] == code and names in error["message"]
    if "operation_id" not in body:
        assert api.get(f"/v1/actions/{op}").status_code == 404
    assert sandbox.records(op) == []


def test_malformed_and_oversized_bodies(api: httpx.Client) -> None:
    malformed = api.post(
        "/v1/actions", content=b'{"conversation_id": ', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_request"
    huge = {"conversation_id": "c-1", "kind": "refund", "params": {**REFUND, "note": "x" * 200_000}}
    oversized = api.post("/v1/actions", json=huge)
    assert oversized.status_code == 413 and oversized.json()["error"]["code"] == "payload_too_large"
    assert api.get("/v1/actions/no-such-op").json()["error"]["code"] == "not_found"
    assert api.get("/v1/actions/bad%20id").status_code == 422
    assert (
        api.post(
            "/v1/actions",
            json={"conversation_id": "c", "kind": "refund", "params": REFUND},
            params={"wait": 31},
        ).status_code
        == 422
    )


def test_a_noop_control_still_honours_wait(api: httpx.Client, sandbox: Sandbox) -> None:
    op = new_id()
    hold = sandbox.fault("bookings", "create", "hold", op, apply=True)
    create(api, "room_booking", BOOKING, operation_id=op, authorized=True)
    sandbox.wait_held(op)
    with ThreadPoolExecutor(1) as pool:
        again = pool.submit(lambda: api.post(f"/v1/actions/{op}/authorize", params={"wait": 15}))
        sandbox.release(hold)
        assert again.result().json()["state"] == "confirmed"  # not the "running" of the moment it asked
