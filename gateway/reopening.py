"""A late control of a settled action whose run has closed: the action opened again to take it.

Runs since `CLOSING_REVISION` close `close_after_settled_s` after their action settled and end with
its whole record (`ActionRecord`); the action still accepts late controls until
`keep_open_after_settled_s` after it settled. A control that finds the last run closed within that
window is first checked against that record, as the run's validator would check it (a refusal or a
no-op opens nothing); then a new run is started from the record (`ActionStart.carried`, `reopens`),
the control is sent to it, and that run closes again after its own linger. Past the window, or for a
run of an earlier revision, nothing is opened: the caller answers as for any closed action.

Two controls never open two runs from one record. Temporal answers a start whose request id is the
creating request id of the workflow id's current run with that run, running or closed, and starts
nothing. A run opened from closed run R is started with request id `reopen:R`, so a second control
that read R closed lands on the first one's run (and when that has closed again meanwhile, it reads
again and opens the action from the newer record); a control whose read went stale (R was opened
since) lands on the newer run the same way, never on a run started from R's older record. A read
could go stale by two runs only if two lingers passed between the read and its start: the start is
made within half a linger of the read (its own deadline included), or the read is made again.
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from settled.gateway.changes import closed_record
from settled.gateway.errors import GatewayError
from settled.gateway.link import ActionHandle, Link
from settled.gateway.runs import ACTION_WORKFLOW_TYPE
from settled.workflows.messages import CURRENT_REVISION, STATUS_MEMO, VERSION_MEMO, ActionStart
from temporalio.api.common.v1 import Memo, Payloads, WorkflowType
from temporalio.api.enums.v1 import WorkflowIdConflictPolicy, WorkflowIdReusePolicy
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.converter import encode_search_attributes

from settled.domain.machine import ActionRecord, NewAction
from settled.domain.models import ActionStatus
from settled.temporal import visibility
from settled.temporal.identity import TASK_QUEUE

# Reads of the last run before a control gives up (each opening of the action that closed again
# before the control reached it costs one).
REOPEN_TRIES = 4

# A control's own check of the record, as its update's validator makes it; raises `GatewayError`.
Check = Callable[[ActionRecord, datetime], None]


@dataclass(frozen=True)
class ClosedRun:
    """An action's run that closed with its whole record."""

    run_id: str
    record: ActionRecord


@dataclass(frozen=True)
class LastRun:
    """The workflow id's latest run: running, or closed (with its record where it left one)."""

    run_id: str
    running: bool
    closed: ClosedRun | None


def reopen_request_id(closed_run_id: str) -> str:
    """The request id of the start that opens the action again from this closed run."""
    return f"reopen:{closed_run_id}"


async def start_reopened(link: Link, workflow_id: str, closed: ClosedRun, within_s: float) -> str:
    """Start the run that opens the action again from `closed`, and return the run id of the run the
    workflow id then has. The start's request id is `reopen_request_id(closed.run_id)`, id reuse
    ALLOW_DUPLICATE, conflict USE_EXISTING: Temporal starts nothing and answers the current run when
    that run was started by this same request (running or closed again) or when any run is running;
    it starts a new one only when the current, closed run was not opened from `closed` (so a caller
    must have read `closed` as the current run, at most half a linger ago). The SDK's own start sends
    a random request id, so the request is made here: the input, the memo (the record's status and
    change number, so reads answer from the new run before its first task) and the search
    attributes, encoded by the client's data converter. `within_s` bounds the call."""
    client = link.client
    record = closed.record
    start = ActionStart(
        new=NewAction(
            operation_id=record.operation_id,
            operation_key=record.operation_key,
            conversation_id=record.conversation_id,
            tenant=record.tenant,
            kind=record.kind,
            params=record.params,
            authorized=record.authorized,
            authorized_by=record.authorized_by,
        ),
        carried=record,
        reopens=closed.run_id,
        revision=CURRENT_REVISION,
        continue_as_new_after=link.continue_as_new_after,
    )
    converter = client.data_converter
    [start_payload, status_payload, version_payload, summary] = await converter.encode(
        [
            start,
            record.status(),
            record.version,
            f"{record.kind.name} {record.operation_id} for {record.conversation_id} (opened again)",
        ]
    )
    request = StartWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name=ACTION_WORKFLOW_TYPE),
        task_queue=TaskQueue(name=TASK_QUEUE),
        input=Payloads(payloads=[start_payload]),
        identity=client.identity,
        request_id=reopen_request_id(closed.run_id),
        workflow_id_reuse_policy=WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
        workflow_id_conflict_policy=WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
        memo=Memo(fields={STATUS_MEMO: status_payload, VERSION_MEMO: version_payload}),
        user_metadata=UserMetadata(summary=summary),
    )
    attributes = visibility.action_attributes(
        record.conversation_id, record.kind.name, record.tenant, record.state.value, record.needs_attention
    )
    encode_search_attributes(attributes, request.search_attributes)
    response = await link.guard(
        lambda: client.workflow_service.start_workflow_execution(
            request, retry=True, timeout=timedelta(seconds=within_s)
        )
    )
    return response.run_id


class Reopening:
    def __init__(self, link: Link) -> None:
        self.link = link

    async def read(self, handle: ActionHandle) -> LastRun:
        """The latest run of the action (`not_found` when there is none)."""
        described = await self.link.guard(handle.describe)
        if described.status is WorkflowExecutionStatus.RUNNING:
            return LastRun(described.run_id, running=True, closed=None)
        record = None
        if described.status is WorkflowExecutionStatus.COMPLETED:
            client, run_id = self.link.client, described.run_id
            record = await self.link.guard(lambda: closed_record(client, handle.id, run_id))
        closed = ClosedRun(described.run_id, record) if record is not None else None
        return LastRun(described.run_id, running=False, closed=closed)

    async def send(
        self, handle: ActionHandle, check: Check, send: Callable[[], Awaitable[ActionStatus]]
    ) -> ActionStatus | None:
        """Send a control (`send`: an update of the action's latest run) that found the action's run
        closed: to the run opened again by another control meanwhile, or to one opened for it here when
        the last run closed within its window and `check` allows the control. None when nothing is
        to be opened (past the window, a run of an earlier revision, or one that ended otherwise): the
        caller answers as for a closed action. A control that meets a run closing again reads again,
        at most REOPEN_TRIES times."""
        loop = asyncio.get_running_loop()
        for _ in range(REOPEN_TRIES):
            read_at = loop.time()
            last = await self.read(handle)
            if not last.running:
                if last.closed is None:
                    return None
                record = last.closed.record
                now = await self.link.clock()
                window_left = record.late_controls_until() - now
                if window_left <= timedelta(0):
                    return None
                check(record, now)
                # A run opened now lingers this long at least (less only at the window's end).
                linger_s = min(record.kind.close_after_settled_s, window_left.total_seconds())
                within_s = linger_s / 2 - (loop.time() - read_at)
                if within_s <= 0:
                    continue  # the read is too old to start from: read again
                await start_reopened(self.link, handle.id, last.closed, within_s)
            try:
                return await send()
            except GatewayError as error:
                if error.code != "not_found":
                    raise
        raise GatewayError(
            "temporal_unavailable",
            f"the action's run closed again {REOPEN_TRIES} times before the call reached it: repeat it",
        )
