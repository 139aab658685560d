"""An action's durable changes, read from its own history: what the creating call and a control's
waiting caller wait on and what the stream follows, with nothing asked of a worker.

Each workflow task in which an action's record changed upserts its memo with the status (and, since
`QUIET_REVISION`, the record's version). A change's number is that version plus one, so that 0 means
"none yet". A long poll of the history (`wait_new_event`) answers as soon as such an event is
written, and costs nothing while nothing changes.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from settled.activities.inputs import DISPATCH
from settled.workflows.messages import STATUS_MEMO, TAKEN_MEMO, VERSION_MEMO
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
)
from temporalio.service import RPCError, RPCStatusCode

from settled.domain.machine import ActionRecord
from settled.domain.models import ActionStatus, TakenSend, is_redacted, redacted_like

PROPERTIES_MODIFIED = EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
COMPLETED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
# A pending activity a worker has taken (Temporal cancels one no worker has taken at once).
TAKEN = (
    PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,
)
# How often an action that does not exist yet is looked for (tracked by its conversation before its
# start is recorded), at first and at most.
NOT_STARTED_POLL_S = (0.2, 10.0)
# How often a wait on an action's status also reads its memo, beside the long poll of its history.
RECHECK_S = 1.0
# How often a settled action whose run closed is looked at while late controls may open it again, at
# first and at most (a describe each: no worker, no Action).
CLOSED_POLL_S = (0.5, 5.0)


async def closed_record(client: Client, workflow_id: str, run_id: str) -> ActionRecord | None:
    """The whole record a completed run of an action ended with (runs since CLOSING_REVISION); None for
    a run that ended with its status alone (earlier runs)."""
    run = client.get_workflow_handle(workflow_id, run_id=run_id)
    events = run.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT, skip_archival=True
    )
    async for event in events:
        if event.event_type != COMPLETED:
            return None
        payloads = event.workflow_execution_completed_event_attributes.result.payloads
        try:
            [record] = await client.data_converter.decode(payloads, [ActionRecord])
        except ValueError:  # an ActionStatus: a run of an earlier revision
            return None
        return record if record.settled_at is not None else None
    return None


async def wall_clock() -> datetime:
    return datetime.now(UTC)


async def snapshot(client: Client, event: HistoryEvent) -> tuple[int | None, ActionStatus] | None:
    """The change number (None for runs that record none) and status a memo upsert carries, or None
    for any other event."""
    if event.event_type != PROPERTIES_MODIFIED:
        return None
    fields = event.workflow_properties_modified_event_attributes.upserted_memo.fields
    if STATUS_MEMO not in fields:
        return None
    [status] = await client.data_converter.decode([fields[STATUS_MEMO]], [ActionStatus])
    number = None
    if VERSION_MEMO in fields:
        [version] = await client.data_converter.decode([fields[VERSION_MEMO]], [int])
        number = version + 1
    return number, status


async def current(
    handle: WorkflowHandle[object, ActionStatus],
) -> tuple[WorkflowExecutionDescription, tuple[int, ActionStatus] | None]:
    """The action's description, and its current change number and status from the memo (None
    before its first workflow task completed). Runs that record no number are given their history's
    length, which every later change's position exceeds. A send that waited in its kind's queue and
    that a worker has taken since is shown as taken (`TakenSend`): it may be reaching the service."""
    described = await handle.describe()
    status = await described.memo_value(STATUS_MEMO, None, type_hint=ActionStatus)
    if status is None:
        return described, None
    taken = await described.memo_value(TAKEN_MEMO, None, type_hint=TakenSend)
    taken_at = _send_taken_at(described) if taken is not None else None
    if taken is not None and taken_at is not None:
        status = taken.applied(status, taken_at)
    version = await described.memo_value(VERSION_MEMO, None, type_hint=int)
    return described, (version + 1 if version is not None else described.history_length, status)


def _send_taken_at(described: WorkflowExecutionDescription) -> datetime | None:
    """When a worker took the run's pending send (Temporal's record that the activity started)."""
    for pending in described.raw_description.pending_activities:
        if (
            pending.activity_type.name == DISPATCH
            and pending.state in TAKEN
            and pending.HasField("last_started_time")
        ):
            return pending.last_started_time.ToDatetime(tzinfo=UTC)
    return None


async def action_changes(
    client: Client,
    handle: WorkflowHandle[object, ActionStatus],
    after: int | None,
    clock: Callable[[], Awaitable[datetime]] = wall_clock,
) -> AsyncIterator[tuple[int, ActionStatus]]:
    """Each durable change of the action after change number `after`, oldest first, as (number,
    status); with `after` None, its current status first. Follows it across continue-as-new and
    across the runs a late control opens (`settled.gateway.reopening`), and ends once its last run
    has closed for good: past its window of late controls (`clock` tells), or a run of an earlier
    revision. While a late control may still open it, the closed run is looked at now and then.

    A run that continued as new is not read again: a reader behind it gets the newer run's first
    status, which holds every transition it missed. Change numbers go on across runs (the record's
    version). Runs started before `QUIET_REVISION` record no change number; their changes are
    numbered by their position in their run's history. Once an action's params are redacted, earlier
    changes read from its history are sent redacted too."""
    last = after
    pause = NOT_STARTED_POLL_S[0]
    read_run: str | None = None
    closed_pause = CLOSED_POLL_S[0]
    closed: tuple[str, ActionRecord | None] | None = None  # the closed run read last, and its record
    while True:
        try:
            described, now = await current(handle)
        except RPCError as error:
            if error.status is not RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(pause)  # tracked, but not started yet (or never: a refused create)
            pause = min(pause * 2, NOT_STARTED_POLL_S[1])
            continue
        if described.run_id == read_run and described.status is not WorkflowExecutionStatus.RUNNING:
            # The last run closed, and all of it was read: done, unless a late control may open it.
            if closed is None or closed[0] != described.run_id:
                closed = (described.run_id, await closed_record(client, handle.id, described.run_id))
            record = closed[1]
            if record is None or await clock() >= record.late_controls_until():
                return
            await asyncio.sleep(closed_pause)
            closed_pause = min(closed_pause * 2, CLOSED_POLL_S[1])
            continue
        closed_pause = CLOSED_POLL_S[0]
        if now is not None and last is None:
            last = now[0]
            yield now
        redacted = now[1] if now is not None and is_redacted(now[1]) else None
        run = client.get_workflow_handle(handle.id, run_id=described.run_id)
        running = described.status is WorkflowExecutionStatus.RUNNING
        # What is recorded now, then (a running run) a long poll that gives each new event as it
        # comes. The long poll starts from the top again (what was read is skipped by number): Temporal's
        # time-skipping test server answers it only once the run closes, even for what it holds.
        for wait in (False, True) if running else (False,):
            async for event in run.fetch_history_events(wait_new_event=wait, skip_archival=True):
                change = await snapshot(client, event)
                if change is None:
                    continue
                number, status = change
                number = number if number is not None else event.event_id
                if last is not None and number <= last:
                    continue
                if redacted is not None and not is_redacted(status):
                    status = redacted_like(status, redacted)
                last = number
                yield number, status
        # Read to its end: describe tells whether it continued as new (a newer run) or ended. A run
        # that was running is read once more once closed (what a long poll gave is not taken as all).
        read_run = None if running else described.run_id


async def awaited(
    client: Client,
    handle: WorkflowHandle[object, ActionStatus],
    ready: Callable[[ActionStatus], bool],
    wait_s: float,
    latest: ActionStatus,
    now: tuple[int, ActionStatus] | None = None,
) -> ActionStatus:
    """The action's status once `ready` holds for it, or as it is when the wait (`wait_s`) ends: how a
    caller who waits for an outcome is served without a timer in the workflow. `latest` is the status
    the caller holds; `now` a read of the memo just made (made here when None). The changes after it
    are followed by a long poll of the history, which costs no Action, with a slower read of the memo
    beside it for a server whose long poll answers late (Temporal's time-skipping test server answers
    once the run closes); a wait that ends unanswered reads the memo once more, so its caller hears the
    status as it is then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s

    def note(status: ActionStatus) -> bool:
        nonlocal latest
        if status.updated_at >= latest.updated_at:
            latest = status
        return ready(latest)

    if now is None:
        _, now = await current(handle)
        if now is None:
            return latest
    if note(now[1]) or wait_s <= 0:
        return latest
    number = now[0]

    async def follow() -> None:
        async with contextlib.aclosing(action_changes(client, handle, number)) as changes:
            async for _, status in changes:
                if note(status):
                    return

    async def recheck() -> None:
        while True:
            await asyncio.sleep(RECHECK_S)
            _, read = await current(handle)
            if read is not None and note(read[1]):
                return

    watchers = [asyncio.ensure_future(follow()), asyncio.ensure_future(recheck())]
    try:
        done, _ = await asyncio.wait(watchers, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        for watcher in done:
            watcher.result()  # a failure to read is the caller's to hear, not a status
    finally:
        for watcher in watchers:
            watcher.cancel()
    if not ready(latest) and loop.time() >= deadline:
        _, read = await current(handle)
        if read is not None:
            note(read[1])
    return latest
