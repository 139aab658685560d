"""A send whose answer is lost is looked up in the same business call (runs since LEAN_REVISION).

On the real stack, against the sandbox's services: the sandbox applies the write and drops the
connection before answering; the send's own call looks the operation up at once, and the action is
confirmed from that lookup within the create's own wait, its history still showing the lost answer.
What Temporal Cloud would bill is counted from the action's real history (`bench.actions`): the same
as a send whose answer came back (no `unknown` written for operators, no backoff timer, one business
call), where the runs recorded before it (the golden histories) took two calls and a timer.
"""

import asyncio
import json
from pathlib import Path

import httpx
from settled.bench.actions import Billed, billed_in_history
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.converter import default as default_converter

from settled.runtime.stack import Stack
from settled.temporal import visibility
from settled.temporal.identity import action_workflow_id
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, states_seen, status, wait_state

GOLDEN = Path(__file__).parent.parent / "golden"
UPSERT = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES


async def _billed_and_states(stack: Stack, op: str) -> tuple[Billed, list[str]]:
    """The action's Actions, and each state its history wrote to the search attributes, in order."""
    client = await Client.connect(stack.temporal_address)
    workflow_id = action_workflow_id(None, op)
    billed = await billed_in_history(client, workflow_id)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    written, payloads = [], default_converter().payload_converter
    for event in history.events:
        if event.event_type == UPSERT:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            if visibility.STATE.name in fields:
                written.append(payloads.from_payload(fields[visibility.STATE.name]))
    return billed, written


def _golden_calls(name: str) -> tuple[int, int]:
    """Local activities and activities a golden history (recorded before the lookup in the send) made."""
    events = json.loads((GOLDEN / f"{name}.json").read_text())["events"]
    markers = [event.get("markerRecordedEventAttributes", {}).get("markerName") for event in events]
    scheduled = [event for event in events if event["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"]
    return markers.count("core_local_activity"), len(scheduled)


def _lookups(sandbox: Sandbox, op: str) -> list[int]:
    return [row["status"] for row in sandbox.requests(op, op="lookup") if row["state"] == "done"]


def _applied_once(sandbox: Sandbox, op: str, service: str, action: dict) -> None:
    """The service's own records: one write reached it, one record stands, and it is the action's."""
    [record] = sandbox.records(op, service)
    assert len(sandbox.writes(op)) == 1 and action["business_ref"] == record["id"]
    assert _lookups(sandbox, op) == [200]  # the send's own call's lookup, and no other
    assert action["attempts"] == 1 and states_seen(action) == ["requested", "running", "unknown", "confirmed"]
    assert any(entry["event"] == "lookup" for entry in action["log"])


def test_a_lost_answer_is_confirmed_within_the_creates_wait_by_a_lookup_in_the_same_call(
    stack: Stack, api: httpx.Client, sandbox: Sandbox
) -> None:
    """The caller waits: the send and its lookup run inside the workflow task, as one local activity."""
    answered, lost = new_id(), new_id()
    sandbox.fault("bookings", "create", "drop_after_apply", lost)
    for op in (answered, lost):
        created = create(api, "room_booking", BOOKING, operation_id=op, authorized=True, wait=10)
        assert created.status_code == 201 and created.json()["state"] == "confirmed", created.text
    _applied_once(sandbox, lost, "bookings", status(api, lost))

    (billed, written), (answered_billed, _) = (
        asyncio.run(_billed_and_states(stack, op)) for op in (lost, answered)
    )
    assert (billed.counts["local activity"], billed.counts["activity"]) == (1, 0)
    assert "unknown" not in written
    assert billed.counts == answered_billed.counts  # what a send whose answer came back costs
    assert _golden_calls("golden8-lost-in-task") == (2, 0)  # before: the send, then the lookup


def test_a_lost_answer_sent_as_an_activity_is_confirmed_by_the_lookup_in_that_activity(
    stack: Stack, api: httpx.Client, sandbox: Sandbox
) -> None:
    """No caller waits: the send is a regular activity, and its lookup runs in that same activity."""
    answered, lost = new_id(), new_id()
    sandbox.fault("refunds", "create", "drop_after_apply", lost)
    for op in (answered, lost):
        create(api, "refund", REFUND, operation_id=op, authorized=True)
    final = wait_state(api, lost, "confirmed")
    wait_state(api, answered, "confirmed")
    _applied_once(sandbox, lost, "refunds", final)

    (billed, written), (answered_billed, _) = (
        asyncio.run(_billed_and_states(stack, op)) for op in (lost, answered)
    )
    assert (billed.counts["local activity"], billed.counts["activity"]) == (0, 1)
    assert "unknown" not in written
    assert billed.counts == answered_billed.counts
    assert _golden_calls("golden8-lost") == (0, 2)


def test_a_lookup_in_the_call_that_cannot_tell_leaves_it_unknown_for_operators_and_never_re_sends(
    stack: Stack, api: httpx.Client, sandbox: Sandbox
) -> None:
    """The lookup in the call gets no answer: `unknown`, written for operators to find, looked up on
    its usual cadence until the service answers; a service without deduplication is never sent twice."""
    op = new_id()
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    lookups_fail = sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "refund_nodedup", REFUND, operation_id=op)
    unknown = wait_state(api, op, "unknown")
    assert lookups_fail and unknown["claim"] == "unknown" and 503 in _lookups(sandbox, op)
    _, written = asyncio.run(_billed_and_states(stack, op))
    assert "unknown" in written
    sandbox.clear_faults()
    final = wait_state(api, op, "confirmed")
    [record] = sandbox.records(op, "refunds")
    assert len(sandbox.writes(op)) == 1 and final["business_ref"] == record["id"]
    assert final["attempts"] == 1
