"""Outages of what settled depends on, with writes in flight: the business service down for
30 s, and the Temporal server SIGKILLed mid-dispatch and restarted on its data dir.

A witness reads every action's status throughout and each answer is judged against the sandbox's
records afterwards. A stack of this module's own, so the session's stack is untouched.
"""

import time
from typing import Any

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.e2e.conftest import TAKEOVER_S
from tests.e2e.watch import ClaimWatcher
from tests.helpers import BOOKING, REFUND, Sandbox, create, healthy, new_id, status, wait_for, wait_state

pytestmark = pytest.mark.timeout(300)

OUTAGE_S = 30.0  # the figure


def _hanging_applied(sandbox: Sandbox, op: str) -> bool:
    writes = sandbox.writes(op)
    return bool(writes) and writes[0]["outcome"] == "hanging" and len(sandbox.records(op)) == 1


def _refused_and_retried(api: httpx.Client, op: str) -> dict[str, Any] | None:
    current = status(api, op)
    return current if any(item["event"] == "retry" for item in current["log"]) else None


def test_the_business_service_down_for_30s_with_writes_in_flight_settles_without_a_duplicate(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    api, sandbox = module_api, module_sandbox
    with ClaimWatcher(module_stack.api_url) as watcher:
        # In flight when the service dies: a keyed write not applied, and two writes applied whose
        # answers never leave (one keyed, one the service cannot deduplicate).
        in_flight = {
            new_id("dies-unapplied"): ("room_booking", BOOKING, "bookings", "hold", {"apply": False}),
            new_id("applied-keyed"): ("room_booking", BOOKING, "bookings", "hang", {"apply": True}),
            new_id("applied-nodedup"): ("refund_nodedup", REFUND, "refunds", "hang", {"apply": True}),
        }
        for op, (kind, params, service, mode, extra) in in_flight.items():
            sandbox.fault(service, "create", mode, op, **extra)
            assert create(api, kind, params, operation_id=op, authorized=True).status_code == 201
            watcher.watch(op)
        for op, (_, _, _, mode, _) in in_flight.items():
            if mode == "hold":
                sandbox.wait_held(op)
            else:
                wait_for(lambda op=op: _hanging_applied(sandbox, op), what=f"{op} applied and hanging")

        module_stack.children["sandbox"].kill()
        down_since = time.monotonic()
        # Created during the outage: no connection is ever made, so nothing may have been sent.
        later = {
            new_id("during-keyed"): ("room_booking", BOOKING),
            new_id("during-refund"): ("refund", REFUND),
            new_id("during-nodedup"): ("refund_nodedup", REFUND),
        }
        for op, (kind, params) in later.items():
            assert create(api, kind, params, operation_id=op, authorized=True).status_code == 201
            watcher.watch(op)
        for op in in_flight:
            unknown = wait_state(api, op, "unknown", timeout_s=TAKEOVER_S)
            assert unknown["claim"] == "unknown" and "check" in unknown["say"]
        for op in later:
            during = wait_for(
                lambda op=op: _refused_and_retried(api, op), TAKEOVER_S, f"{op} refused, retried"
            )
            assert (during["state"], during["attempts"], during["claim"]) == ("requested", 0, "in_progress")
            assert "Nothing has been sent yet" in during["say"]
        for op in in_flight:  # looked up with backoff all along, and flagged, never failed
            wait_for(lambda op=op: status(api, op)["needs_attention"], TAKEOVER_S, f"{op} needs attention")

        # The outage itself is the subject: it lasts the 30 s, measured, whatever came first.
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_since)))
        assert {status(api, op)["state"] for op in in_flight} == {"unknown"}
        assert {status(api, op)["state"] for op in later} == {"requested"}
        module_stack.start_sandbox()  # the same data dir and port

        for op in [*in_flight, *later]:
            action = wait_state(api, op, "confirmed", "failed", "cancelled", timeout_s=TAKEOVER_S)
            records = sandbox.records(op)
            assert (action["state"], len(records)) == ("confirmed", 1), (op, action["history"], records)
            assert action["business_ref"] == records[0]["id"] and action["needs_attention"] is False
        for op in later:
            assert len(sandbox.writes(op)) == 1 and status(api, op)["attempts"] == 1
        nodedup = next(op for op in in_flight if op.startswith("applied-nodedup"))
        assert len(sandbox.writes(nodedup)) == 1  # settled by a lookup, never sent again
        verdict = watcher.verdict(api, sandbox.http)
    assert verdict.violations == [], verdict.violations
    assert verdict.claims.get("done", 0) > 0 and verdict.claims.get("unknown", 0) > 0


def test_the_temporal_server_sigkilled_mid_dispatch_loses_nothing_and_resumes(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    api, sandbox, conversation = module_api, module_sandbox, new_id("conv")
    with ClaimWatcher(module_stack.api_url) as watcher:
        first = create(api, "refund", REFUND, conversation_id=conversation, authorized=True, wait=10).json()
        # Confirmed, within its wait or (on a busy machine) soon after.
        done = wait_state(api, first["operation_id"], "confirmed", "failed", timeout_s=TAKEOVER_S)
        assert done["state"] == "confirmed"
        line = {"channel": "voice", "text": done["say"][:20], "completed": False}  # cut mid-sentence
        assert api.post(f"/v1/actions/{done['operation_id']}/presented", json=line).status_code == 200
        waiting = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
        dropped = {"type": "channel_closed", "channel": "voice", "reason": "dropped"}
        assert api.post(f"/v1/conversations/{conversation}/events", json=dropped).status_code == 202
        held = new_id("held")
        hold = sandbox.fault("bookings", "create", "hold", held, apply=True)
        create(api, "room_booking", BOOKING, operation_id=held, conversation_id=conversation, authorized=True)
        sandbox.wait_held(held)
        for op in (done["operation_id"], waiting, held):
            watcher.watch(op)
        before = api.get(f"/v1/conversations/{conversation}/handoff").json()

        module_stack.children["temporal"].kill()
        sandbox.release(hold)  # applied while Temporal is down: the worker cannot record the answer
        wait_for(lambda: len(sandbox.records(held)) == 1, what="the held booking applied")
        module_stack.start_server()  # the same data dir
        wait_for(lambda: healthy(api), TAKEOVER_S, "the API to see Temporal and a worker again")

        after = api.get(f"/v1/conversations/{conversation}/handoff").json()
        assert after["channels"] == before["channels"] == {"voice": "closed", "text": "unused"}
        assert [a["operation_id"] for a in after["actions"]] == [a["operation_id"] for a in before["actions"]]
        presented = status(api, done["operation_id"])["presented"]
        assert (presented["text"], presented["completed"]) == (line["text"], False)
        assert status(api, waiting)["state"] == "requested"
        assert done["business_ref"] in after["say"]  # the cut sentence is delivered again
        action = wait_state(api, held, "confirmed", timeout_s=TAKEOVER_S)
        assert len(sandbox.records(held)) == 1 and action["business_ref"] == sandbox.records(held)[0]["id"]
        resumed = api.post(f"/v1/actions/{waiting}/authorize", params={"wait": 10}).json()
        assert resumed["state"] == "confirmed" and len(sandbox.records(waiting)) == 1
        verdict = watcher.verdict(api, sandbox.http)
    assert verdict.violations == [], verdict.violations
