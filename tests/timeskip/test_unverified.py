"""An unverified (`unknown`) action over days: looked up with backoff, `needs_attention` after
`attention_after_s` (300 s), automatic lookups stop after `give_up_after_s` (7 days) and a reconcile
or a conversation event restarts them. Never turned into `failed` by a timer, never re-sent."""

from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from settled.temporal import visibility
from settled.temporal.identity import action_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

REFUND = {"order_id": "o-77", "amount": 12.5, "currency": "EUR"}


async def _lost_refund(harness: Harness) -> tuple[str, str]:
    """A refund the service applied but whose answer was lost, and whose lookups fail (503) until the
    faults are cleared: `unknown`, looked up again and again."""
    conversation_id, op = new_id("conv"), new_id()
    await harness.truth.fault("refunds", "create", "drop_after_apply", op)
    await harness.truth.fault("refunds", "lookup", "fail_before_apply", op, count=0, status=503)
    body = {"conversation_id": conversation_id, "kind": "refund", "params": REFUND, "operation_id": op}
    response = await harness.api.post("/v1/actions", json=body, params={"wait": 5})
    assert response.status_code == 201, response.text
    assert response.json()["state"] in ("running", "unknown"), response.json()

    async def unknown() -> dict[str, Any] | None:
        current = await harness.status(op)
        return current if current["state"] == "unknown" else None

    # Within the create's wait, or (on a busy machine) soon after it.
    await eventually(unknown, 60, f"{op} to be unknown")
    return conversation_id, op


async def _lookups(harness: Harness, op: str) -> int:
    return len(await harness.truth.requests(op, "lookup"))


async def _attention_attribute(harness: Harness, op: str) -> Any:
    description = await harness.env.client.get_workflow_handle(action_workflow_id(None, op)).describe()
    return description.typed_search_attributes.get(visibility.NEEDS_ATTENTION)


async def test_needs_attention_is_set_at_attention_after_s_and_shown_to_operators(harness: Harness) -> None:
    _, op = await _lost_refund(harness)
    await harness.skip(timedelta(seconds=290))
    status = await harness.status(op)
    assert (status["state"], status["needs_attention"]) == ("unknown", False)
    assert await _lookups(harness, op) >= 5  # 1 s, 2 s, 4 s, … after the send
    assert await _attention_attribute(harness, op) is False

    await harness.skip(timedelta(seconds=20))

    async def flagged() -> dict[str, Any] | None:
        current = await harness.status(op)
        return current if current["needs_attention"] else None

    status = await eventually(flagged, what="needs_attention")
    assert status["state"] == "unknown" and status["claim"] == "unknown"
    assert any(entry["event"] == "needs_attention" for entry in status["log"])
    # Operators find it by the search attribute (`settled list`), not only by reading the status.
    assert await eventually(lambda: _attention_attribute(harness, op), what="the search attribute")
    await harness.replay(await harness.action_runs(op))


async def _gave_up(harness: Harness, op: str) -> int:
    """Lets a week and an hour pass; returns the number of lookups made, after checking that two
    more days bring none."""
    await harness.skip(7 * DAY + timedelta(hours=1))
    made = await _lookups(harness, op)
    await harness.skip(2 * DAY)
    assert await _lookups(harness, op) == made, "automatic lookups went on after give_up_after_s"
    status = await harness.status(op)
    # Still unknown: a timer never turns it into failed.
    assert (status["state"], status["needs_attention"]) == ("unknown", True)
    assert 20 < made < 100, made  # backoff up to the kind's 6 h cap over 7 days
    return made


async def test_lookups_stop_after_give_up_after_s_and_reconcile_restarts_them(harness: Harness) -> None:
    _, op = await _lost_refund(harness)
    made = await _gave_up(harness, op)

    await harness.truth.clear_faults()  # the service answers lookups again
    answer = await harness.api.post(f"/v1/actions/{op}/reconcile", params={"wait": 5})
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "confirmed" and answer.json()["business_ref"]
    assert await _lookups(harness, op) == made + 1
    # Never re-sent: one request reached the service, one refund exists.
    assert len(await harness.truth.writes(op)) == 1
    assert len(await harness.truth.records(op)) == 1


async def test_a_conversation_event_restarts_lookups_that_gave_up(harness: Harness) -> None:
    conversation_id, op = await _lost_refund(harness)
    made = await _gave_up(harness, op)

    # A day after the fault went away nothing has noticed: lookups have stopped.
    await harness.truth.clear_faults()
    await harness.skip(DAY)
    assert await _lookups(harness, op) == made
    event = {"type": "channel_opened", "channel": "voice"}
    answer = await harness.api.post(f"/v1/conversations/{conversation_id}/events", json=event)
    assert answer.status_code == 202 and answer.json()["reconciling"] == [op], answer.text

    async def confirmed() -> dict[str, Any] | None:
        current = await harness.status(op)
        return current if current["state"] == "confirmed" else None

    status = await eventually(confirmed, what="the lookup the event started")
    assert status["needs_attention"] is False and status["business_ref"]
    assert len(await harness.truth.writes(op)) == 1
    # Once confirmed, the action closes after its open days like any other.
    await harness.skip(8 * DAY)
    handle = harness.env.client.get_workflow_handle(action_workflow_id(None, op))

    async def closed() -> bool:
        return (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, what="the action to close")
