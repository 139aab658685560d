"""One timer per deadline: a change that leaves a settled action's close deadline where it was (a
`presented`, a cancel answered before its run closes) starts no timer, and the run still closes at the
deadline it had; a late control after that opens a new run. Counted from the runs' own histories."""

from datetime import datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory

from settled.temporal.identity import action_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

BOOKING = {"room": "Ada", "day": "Thursday"}
# The timeskip kinds' window of late controls (the default `keep_open_after_settled_s`), and when the
# booking's params are redacted (its run stays open until then, not only its linger).
WINDOW = 7 * DAY
REDACTED_AFTER = DAY
TIMER_STARTED = EventType.EVENT_TYPE_TIMER_STARTED
TIMER_FIRED = EventType.EVENT_TYPE_TIMER_FIRED
TIMER_CANCELED = EventType.EVENT_TYPE_TIMER_CANCELED
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


async def _book(harness: Harness) -> tuple[str, dict]:
    body = {
        "conversation_id": new_id("conv"),
        "kind": "room_booking",
        "params": BOOKING,
        "operation_id": new_id(),
        "authorized": True,
    }
    response = await harness.api.post("/v1/actions", json=body, params={"wait": 5})
    assert response.status_code == 201, response.text
    booked = dict(response.json())
    assert booked["state"] == "confirmed" and booked["business_ref"], booked
    return body["operation_id"], booked


def _settled_at(status: dict) -> datetime:
    (confirmed,) = [entry for entry in status["history"] if entry["state"] == "confirmed"]
    return datetime.fromisoformat(confirmed["at"])


def _count(runs: list[WorkflowHistory], kind: "EventType.ValueType") -> int:
    return sum(event.event_type == kind for run in runs for event in run.events)


async def _present(harness: Harness, op: str, text: str) -> None:
    body = {"channel": "voice", "text": text, "completed": True}
    presented = await harness.api.post(f"/v1/actions/{op}/presented", json=body)
    assert presented.status_code == 200 and presented.json()["presented"]["text"] == text, presented.text


async def _closes_at_its_deadline(harness: Harness, op: str, deadline: datetime) -> None:
    """Open an hour before `deadline`, closed by it (within a minute: the test server's clock also runs
    while the test does)."""
    handle = harness.env.client.get_workflow_handle(action_workflow_id(None, op))
    assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING

    async def closed() -> bool:
        return (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED

    await harness.skip(timedelta(hours=2))
    await eventually(closed, 60, f"{op} to close")
    closed_at = (await handle.describe()).close_time
    assert closed_at is not None and abs(closed_at - deadline) < timedelta(minutes=1), (closed_at, deadline)


async def test_a_presented_before_the_run_closes_adds_an_update_and_no_timer(harness: Harness) -> None:
    op, booked = await _book(harness)
    settled_at = _settled_at(await harness.status(op))
    before = await harness.action_runs(op)
    # Its run closes when its params are redacted, a day on (before that, its linger would close it
    # with the params still in its memo and its record): one timer, to that deadline.
    assert _count(before, TIMER_STARTED) == 1

    await _present(harness, op, booked["say"])  # heard at once, as in a live call
    after = await harness.action_runs(op)
    assert _count(after, UPDATE_ACCEPTED) == _count(before, UPDATE_ACCEPTED) + 1
    assert (_count(after, TIMER_STARTED), _count(after, TIMER_CANCELED)) == (1, 0)

    await harness.skip(REDACTED_AFTER - timedelta(hours=1))
    await _closes_at_its_deadline(harness, op, settled_at + REDACTED_AFTER)
    [closed] = await harness.action_runs(op)
    assert (_count([closed], TIMER_STARTED), _count([closed], TIMER_FIRED)) == (1, 1)

    # Late in the window, a `presented` opens it again: the new run's linger is its one timer.
    await harness.skip(WINDOW - REDACTED_AFTER - timedelta(hours=3))
    await _present(harness, op, "It is booked, as I said.")
    first, reopened = await harness.action_runs(op)
    assert first.events == closed.events
    assert (_count([reopened], UPDATE_ACCEPTED), _count([reopened], TIMER_STARTED)) == (1, 1)
    status = await harness.status(op)
    assert status["state"] == "confirmed" and status["presented"]["completed"] is True
    assert status["presented"]["text"] == "It is booked, as I said."
    await harness.replay([first, reopened])


async def test_a_cancel_before_the_run_closes_compensates_with_no_timer_of_its_own(harness: Harness) -> None:
    op, booked = await _book(harness)
    settled_at = _settled_at(await harness.status(op))
    await _present(harness, op, booked["say"])
    await harness.skip(REDACTED_AFTER - timedelta(hours=2))

    # No wait: a control that waits for its answer waits on a timer of its own, apart from the loop's.
    cancelled = await harness.api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"})
    assert cancelled.status_code == 200, cancelled.text

    async def reversed_() -> dict | None:
        status = await harness.status(op)
        return status if status["state"] == "cancelled" else None

    status = await eventually(reversed_, 60, f"{op} to be reversed")
    assert status["compensated"] is True and status["business_ref"] == booked["business_ref"]
    records = await harness.truth.records(op)
    assert [record["id"] for record in records] == [booked["business_ref"]]
    assert records[0]["cancelled_at"] is not None, records
    assert len(await harness.truth.requests(op, "cancel")) == 1
    # The reversal changed the state, not the deadline (the redaction): still the one timer.
    [run] = await harness.action_runs(op)
    assert (_count([run], TIMER_STARTED), _count([run], TIMER_CANCELED)) == (1, 0)

    await _closes_at_its_deadline(harness, op, settled_at + REDACTED_AFTER)
    [closed] = await harness.action_runs(op)
    assert (_count([closed], TIMER_STARTED), _count([closed], TIMER_FIRED)) == (1, 1)
    assert (await harness.status(op))["state"] == "cancelled"
    await harness.replay([closed])
