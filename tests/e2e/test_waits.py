"""A control that waits for its outcome starts no timer in the workflow: its update answers at once and
the gateway awaits the outcome in the action's history (no Action). Counted from the real history as
the bench counts it (`bench.actions.billed_in_history`), with the caller still answered the verified
outcome within its wait, or the status as it is when the wait ends."""

import asyncio
import time
from typing import Any

import httpx
from settled.bench.actions import Billed, billed_in_history
from settled.gateway.errors import ANSWER_GRACE_S
from settled.gateway.runs import every_run
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.e2e.conftest import LONG_TIMEOUT, StackOptions
from tests.helpers import BOOKING, REFUND, TEST_KINDS, Sandbox, create, new_id, status, wait_for

# The test kinds with a 20 s timeout (a held send stays held), and a booking quick enough to be sent
# inside the workflow task while its caller waits.
STACK = StackOptions({**LONG_TIMEOUT.kinds, "quick_booking": TEST_KINDS["room_booking"]})
# A wait no deadline of the action shares: a timer set for it would be the control's own.
WAIT_S = 17.0
# A wait that ends while the send is held.
SHORT_WAIT_S = 2.0


def _timers(stack: Stack, operation_id: str) -> tuple[Billed, list[float]]:
    """The action's Actions over all its runs, and how long each timer they started was set for."""

    async def read() -> tuple[Billed, list[float]]:
        client = await Client.connect(stack.temporal_address)
        workflow_id = action_workflow_id(None, operation_id)
        timers = [
            event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
            for history in await every_run(client, workflow_id)
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        ]
        return await billed_in_history(client, workflow_id), timers

    return asyncio.run(read())


def _none_for_the_wait(timers: list[float]) -> bool:
    return all(abs(seconds - WAIT_S) > 1.0 for seconds in timers)


def _go_ahead(api: httpx.Client, sandbox: Sandbox, kind: str, op: str) -> dict[str, Any]:
    """A booking created waiting for its go-ahead, then authorized with a wait: its verified outcome."""
    requested = create(api, kind, BOOKING, operation_id=op, wait=0)
    assert requested.status_code == 201, requested.text
    assert requested.json()["state"] == "requested" and requested.json()["authorized"] is False
    go_ahead = api.post(f"/v1/actions/{op}/authorize", params={"wait": WAIT_S}, timeout=WAIT_S + 30)
    assert go_ahead.status_code == 200, go_ahead.text
    confirmed = go_ahead.json()
    assert confirmed["state"] == "confirmed"  # verified within the wait: not the status at its end
    [booking] = sandbox.records(op)
    assert booking["status"] == "booked" and confirmed["business_ref"] == booking["id"]
    return confirmed


def test_a_go_ahead_and_a_cancel_that_wait_start_no_timer_and_hear_the_verified_outcome(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """The go-ahead of a booking sent inside the workflow task (a quick kind: the wait covers its
    timeout) and of one sent by an activity (its timeout longer than the wait), then a cancel of the
    first, confirmed, which reverses it: each caller hears the verified outcome, and no timer was set
    for any of the waits (the timers left are the actions' own deadlines)."""
    stack, api, sandbox = module_stack, module_api, module_sandbox
    in_task, by_activity = new_id(), new_id()
    _go_ahead(api, sandbox, "quick_booking", in_task)
    billed, timers = _timers(stack, in_task)
    assert (billed.counts["local activity"], billed.counts["activity"]) == (1, 0)
    assert billed.counts["timer"] == len(timers) and _none_for_the_wait(timers)
    _go_ahead(api, sandbox, "room_booking", by_activity)
    billed, timers = _timers(stack, by_activity)
    assert (billed.counts["local activity"], billed.counts["activity"]) == (0, 1)
    assert billed.counts["timer"] == len(timers) and _none_for_the_wait(timers)

    cancel = api.post(f"/v1/actions/{in_task}/cancel", params={"wait": WAIT_S}, timeout=WAIT_S + 30)
    assert cancel.status_code == 200, cancel.text
    cancelled = cancel.json()
    assert cancelled["state"] == "cancelled" and cancelled["compensated"] is True
    [booking] = sandbox.records(in_task)
    assert booking["status"] == "cancelled"  # the service's own record: reversed
    billed, timers = _timers(stack, in_task)
    assert billed.counts["timer"] == len(timers) and _none_for_the_wait(timers)


def test_a_wait_that_ends_before_the_outcome_answers_the_status_then(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """A cancel of a refund whose send is held (sent by an activity, its timeout far off): the wait ends
    first, and the caller hears the status as it is then, at the end of its wait and no later than the
    guard allows past it."""
    api, sandbox = module_api, module_sandbox
    op = new_id()
    hold = sandbox.fault("refunds", "create", "hold", op, apply=True)
    assert create(api, "refund_nodedup", REFUND, operation_id=op, wait=0).status_code == 201
    sandbox.wait_held(op)
    started = time.monotonic()
    cancel = api.post(f"/v1/actions/{op}/cancel", params={"wait": SHORT_WAIT_S}, timeout=60)
    answered_after = time.monotonic() - started
    assert cancel.status_code == 200, cancel.text
    held = cancel.json()
    assert held["state"] == "running" and held["cancel_requested"] is True
    assert SHORT_WAIT_S <= answered_after < SHORT_WAIT_S + ANSWER_GRACE_S
    assert status(api, op)["state"] == "running"  # still held: the outcome was not in yet
    sandbox.release(hold)
    # Applied before the cancel could stop it, and a refund cannot be reversed: confirmed, as it was.
    wait_for(lambda: status(api, op)["state"] == "confirmed", what="the held refund confirmed")
    assert len(sandbox.writes(op)) == 1
