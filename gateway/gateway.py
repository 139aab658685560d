"""The one place that talks to Temporal on behalf of channels (the API) and operators (the CLI).

Every call is scoped to a tenant (None without API keys). Failures come out as `GatewayError`
carrying the contract's error code, so the API and the CLI report them the same way.
"""

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from settled.gateway.changes import action_changes, current, snapshot
from settled.gateway.kept import kept_from_history
from settled.workflows.action import ActionWorkflow
from settled.workflows.conversation import IDLE_CLOSE_AFTER, ConversationWorkflow
from settled.workflows.messages import (
    CURRENT_REVISION,
    ActionStart,
    Amend,
    Authorize,
    Cancel,
    ChannelEvent,
    ChannelEventResult,
    ConversationStart,
    ConversationState,
    ConversationView,
    Present,
    Reconcile,
    Register,
)
from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from settled.domain.handoff import Channels, Handoff, build_handoff
from settled.domain.kinds import Kinds
from settled.domain.machine import ActionRecord, NewAction
from settled.domain.models import WAIT_MAX_S, ActionStatus, CreateAction
from settled.domain.params import InvalidParams, validate_params
from settled.domain.states import IN_PROGRESS, MAY_BE_IN_FLIGHT, SETTLED, State
from settled.runtime import tracing
from settled.runtime.config import Settings
from settled.temporal import visibility
from settled.temporal.codec import data_converter
from settled.temporal.identity import (
    TASK_QUEUE,
    action_workflow_id,
    conversation_workflow_id,
    kind_task_queue,
    operation_key,
)

T = TypeVar("T")
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
TASK_SCHEDULED = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
# How long past a caller's wait an answer from Temporal may take before the caller is told to retry.
ANSWER_GRACE_S = 8.0
# A status read costs the server alone (the memo), so a no-op control's wait can look often.
NOOP_WAIT_POLL_S = 0.02
# New actions started eagerly at once by one API process; more are started through the task queue.
EAGER_AT_ONCE = 16
# How often a creating call also looks at the new action's memo while its long poll is pending: soon
# at first, then less often, so that a burst of waiting calls does not crowd out the starts it waits on.
MEMO_RECHECK_S = (0.25, 1.0, 2.0)
HTTP_STATUS = {
    "not_found": 404,
    "unknown_kind": 422,
    "invalid_params": 422,
    "invalid_request": 422,
    "operation_conflict": 409,
    "already_dispatched": 409,
    "not_amendable": 409,
    "cannot_cancel": 409,
    "temporal_unavailable": 503,
}
# What a control on an action whose workflow has closed (long settled) answers.
_CLOSED_ANSWER = {"amend": "not_amendable", "cancel": "cannot_cancel", "presented": "not_amendable"}


class GatewayError(Exception):
    """A call the API answers with an error: `code` is the API's error code (not_found,
    operation_conflict, temporal_unavailable, ...). The client's errors are `settled.client`'s own."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 400)


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.namespace,
            data_converter=data_converter(settings.encryption_keys),
            runtime=runtime,
            interceptors=tracing.client_interceptors(),
        )
    except RuntimeError as error:  # the SDK's core reports connection failures this way
        raise GatewayError(
            "temporal_unavailable", f"cannot reach Temporal at {settings.temporal_address}: {error}"
        ) from None


def _search_attributes(conversation_id: str, kind: str, tenant: str | None) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(visibility.CONVERSATION, conversation_id),
            SearchAttributePair(visibility.KIND, kind),
            SearchAttributePair(visibility.STATE, "requested"),
            SearchAttributePair(visibility.TENANT, tenant or visibility.NO_TENANT),
            SearchAttributePair(visibility.NEEDS_ATTENTION, False),
        ]
    )


def _started(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the start created the run (False: one with this id was running already). The SDK keeps
    the server's answer on the handle without a public accessor; the version is pinned, and the
    repeated-create tests fail if this ever reads wrong."""
    response = getattr(handle, "_start_workflow_response", None)
    return bool(getattr(response, "started", True))


def _finishing(call: Awaitable[T]) -> "asyncio.Future[T]":
    """A call that runs to its end even when its caller stops waiting for it (answered 503 at the
    deadline, or gone): Temporal may have received it already, and the caller's repeat meets what it
    made. Its outcome is read by whoever still waits, else dropped."""
    future = asyncio.ensure_future(call)
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


def _never_ran(error: RPCError) -> bool:
    """A query refused because no workflow task of the run has run (so no worker can answer it)."""
    return error.status is RPCStatusCode.FAILED_PRECONDITION


def _unavailable(error: RPCError) -> bool:
    return error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


class Gateway:
    def __init__(self, client: Client, kinds: Kinds, settings: Settings, eager: bool = False) -> None:
        self.client = client
        self.kinds = kinds
        self.settings = settings
        # A worker on this client (the API's own) runs a new action's first task: start it eagerly,
        # while fewer than EAGER_AT_ONCE are under way; beyond that (a burst), through the task queue,
        # so the API's process does not take on every first task of the burst itself.
        self.eager = eager
        self._eager_under_way = 0
        # History events after which the workflows this gateway starts continue as new; None: their
        # own limit. Tests lower it to see continue-as-new without thousands of events.
        self.continue_as_new_after: int | None = None
        # How long a conversation stays open with nothing new; tests lower it to see one close.
        self.idle_close_after = IDLE_CLOSE_AFTER
        # How long past a caller's wait Temporal may take to answer; tests lower it.
        self.answer_grace_s = ANSWER_GRACE_S

    # -- actions -------------------------------------------------------------------------------

    def _action(self, tenant: str | None, operation_id: str) -> WorkflowHandle[ActionWorkflow, ActionStatus]:
        return self.client.get_workflow_handle_for(
            ActionWorkflow.run, action_workflow_id(tenant, operation_id)
        )

    def _conversation(
        self, tenant: str | None, conversation_id: str
    ) -> WorkflowHandle[ConversationWorkflow, None]:
        return self.client.get_workflow_handle_for(
            ConversationWorkflow.run, conversation_workflow_id(tenant, conversation_id)
        )

    async def create(
        self, tenant: str | None, body: CreateAction, wait_s: float
    ) -> tuple[bool, ActionStatus]:
        """(created, status). Nothing is recorded unless the kind and params are valid."""
        kind = self.kinds.get(body.kind)
        if kind is None:
            raise GatewayError(
                "unknown_kind", f"unknown kind {body.kind!r}; known: {', '.join(self.kinds.names())}"
            )
        try:
            validate_params(kind, body.params)
        except InvalidParams as error:
            raise GatewayError("invalid_params", str(error)) from None
        operation_id = body.operation_id or f"op_{uuid.uuid4().hex}"
        new = NewAction(
            operation_id=operation_id,
            operation_key=operation_key(tenant, operation_id),
            conversation_id=body.conversation_id,
            tenant=tenant,
            kind=kind,
            params=body.params,
            authorized=body.authorized,
            authorized_by=body.authorized_by,
        )
        register = Register(kind=kind.name, params=body.params, wait_s=wait_s)
        # Every step shares the caller's one wait (and the guard's grace past it): under a burst the
        # server takes seconds to start each workflow, and a start cut off at a grace of its own,
        # before the wait is spent, was never made.
        loop = asyncio.get_running_loop()
        ends = loop.time() + wait_s

        def left() -> float:
            return ends - loop.time()

        # The conversation learns of the action while it starts, not before: one round trip less on
        # the caller's path. Neither answer is given before both are durable, so a handoff read after
        # this call returns always lists the action; a crash between the two is mended by the
        # client's retry with the same operation id (both calls are idempotent).
        tracking = asyncio.ensure_future(self._track(tenant, body.conversation_id, operation_id, wait_s))
        sent_at = datetime.now(UTC)
        eager = self.eager and self._eager_under_way < EAGER_AT_ONCE
        self._eager_under_way += eager
        try:
            # Under a burst a start can take longer than the caller's wait: it still finishes, so the
            # caller's repeat (the 503 asks for one) finds the action started, not missing.
            start = _finishing(
                self.client.start_workflow(
                    ActionWorkflow.run,
                    ActionStart(
                        new=new,
                        creating_wait_s=wait_s,
                        revision=CURRENT_REVISION,
                        continue_as_new_after=self.continue_as_new_after,
                    ),
                    id=action_workflow_id(tenant, operation_id),
                    task_queue=TASK_QUEUE,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    search_attributes=_search_attributes(body.conversation_id, kind.name, tenant),
                    static_summary=f"{kind.name} {operation_id} for {body.conversation_id}",
                    request_eager_start=eager,
                )
            )
            handle = await self._guard(lambda: asyncio.shield(start), left())
            if _started(handle):
                # What the start recorded, for a busy engine that has not run the run's first task
                # by the end of the wait (`_answer`). The guard leaves room for that answer even when
                # the start itself took most of the grace.
                recorded = ActionRecord.create(new, sent_at)
                recorded.apply_register()
                status = await self._guard(
                    lambda: self._answer(handle, left(), recorded.status()),
                    max(left(), -self.answer_grace_s / 2),
                )
                await tracking
                return True, status
            # It runs already (a repeat, or a concurrent create): its update registers this call.
            register.wait_s = max(0.0, left())
            registered = await self._guard(
                lambda: handle.execute_update(ActionWorkflow.register, register), left()
            )
        except (WorkflowAlreadyStartedError, RPCError) as error:
            # The action ran to its end long ago; its record still answers queries. (A server may
            # say so without the details the SDK turns into WorkflowAlreadyStartedError.)
            if isinstance(error, RPCError) and error.status is not RPCStatusCode.ALREADY_EXISTS:
                await asyncio.gather(tracking, return_exceptions=True)
                raise
            await tracking
            return False, await self._closed_repeat(tenant, operation_id, register)
        except BaseException:
            await asyncio.gather(tracking, return_exceptions=True)
            raise
        finally:
            self._eager_under_way -= eager
        await tracking
        return registered.created, registered.status

    async def _answer(
        self, handle: WorkflowHandle[ActionWorkflow, ActionStatus], left_s: float, recorded: ActionStatus
    ) -> ActionStatus:
        """What the creating call is answered: the status the new run keeps in its memo, once it is out
        of requested/running or when the wait (`left_s`, less than 0 when the start took longer) ends.
        Learned by a long poll of the run's history, which answers as soon as a change is recorded (no
        query, no update), and by a slower look at the memo while the long poll has given nothing, for
        a server whose long poll answers late (Temporal's time-skipping test server waits for the
        close): once it has answered, a look at the memo would only cost the server a describe.

        Until the run's first workflow task is recorded there is no memo. A busy engine may not have
        handed that task to any worker when the wait and half the grace past it are spent: the call is
        then answered with `recorded`, what the start made durable (`requested`), rather than told to
        retry. Only while no worker has taken the task: one that has may be sending inside it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, left_s)
        recorded_by = loop.time() + left_s + self.answer_grace_s / 2
        latest: ActionStatus | None = None
        changed = asyncio.Event()

        def note(status: ActionStatus | None) -> None:
            nonlocal latest
            if status is not None and (latest is None or status.updated_at >= latest.updated_at):
                latest = status
                changed.set()

        async def follow() -> None:
            async for event in handle.fetch_history_events(wait_new_event=True, skip_archival=True):
                change = await snapshot(self.client, event)
                if change is not None:
                    note(change[1])
                    if change[1].state not in IN_PROGRESS:
                        return  # the answer: arm no further long poll for the server to serve

        async def recheck() -> None:
            for pause in itertools.chain(MEMO_RECHECK_S, itertools.repeat(MEMO_RECHECK_S[-1])):
                await asyncio.sleep(pause)
                if latest is not None and not following.done():
                    continue  # the long poll answers: a look at the memo would only cost the server
                with suppress(GatewayError):  # a slow look is no answer: the next one may be quicker
                    note(await self._memo_status(handle))

        following = asyncio.ensure_future(follow())
        watchers = [following, asyncio.ensure_future(recheck())]
        try:
            while True:
                if latest is not None and (latest.state not in IN_PROGRESS or loop.time() >= deadline):
                    return await self._maybe_taken(handle, latest)
                for watcher in watchers:
                    if watcher.done() and watcher.exception() is not None:
                        raise watcher.exception()  # type: ignore[misc]
                if latest is None and loop.time() >= recorded_by and await self._no_task_taken(handle):
                    return recorded
                changed.clear()
                # Until the first status, the caller's guard bounds the wait.
                timeout = max(0.0, deadline - loop.time()) if latest is not None else MEMO_RECHECK_S[0]
                with suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)
        finally:
            for watcher in watchers:
                watcher.cancel()

    async def _maybe_taken(
        self, handle: WorkflowHandle[ActionWorkflow, ActionStatus], status: ActionStatus
    ) -> ActionStatus:
        """`status`, or, where it may be a send waiting in its kind's queue, what a read shows now: a
        worker may have taken the send since (`settled.gateway.changes.current`)."""
        if status.state is not State.REQUESTED or not status.authorized:
            return status
        with suppress(GatewayError):
            return await self._memo_status(handle) or status
        return status

    async def _no_task_taken(self, handle: WorkflowHandle[ActionWorkflow, ActionStatus]) -> bool:
        """Whether the run's first workflow task is still waiting for a worker, on its first attempt, and
        nothing is in the memo: then nothing has run, and nothing can have been sent."""
        try:
            described, change = await self._guard(lambda: current(handle))
        except GatewayError:
            return False
        pending = described.raw_description.pending_workflow_task
        return change is None and pending.state == TASK_SCHEDULED and pending.attempt == 1

    async def _closed_repeat(self, tenant: str | None, operation_id: str, register: Register) -> ActionStatus:
        conflict = await self._guard(
            lambda: self._action(tenant, operation_id).query(ActionWorkflow.conflict, register)
        )
        if conflict:
            raise GatewayError("operation_conflict", conflict)
        return await self.get(tenant, operation_id)

    async def _track(
        self, tenant: str | None, conversation_id: str, operation_id: str, wait_s: float
    ) -> None:
        def tell() -> Awaitable[WorkflowHandle[Any, Any]]:
            # Finished like the action's start: an action started after its caller gave up is in its
            # conversation too.
            return asyncio.shield(
                _finishing(
                    self.client.start_workflow(
                        ConversationWorkflow.run,
                        self._conversation_start(tenant, conversation_id),
                        **self._conversation_options(tenant, conversation_id),
                        start_signal="track_action",
                        start_signal_args=[operation_id],
                        # Lazily: the start and the signal are durable at once, and a workflow task
                        # runs only once something needs it (another action, a channel event) or the
                        # idle period ends.
                        start_delay=self.idle_close_after,
                    )
                )
            )

        await self._in_conversation(tenant, conversation_id, tell, wait_s)

    def _conversation_options(
        self,
        tenant: str | None,
        conversation_id: str,
        reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.REJECT_DUPLICATE,
    ) -> dict[str, Any]:
        """What every start of a conversation's run shares. A closed one is started again only by its
        reopening (`reuse`), which carries what it kept."""
        return {
            "id": conversation_workflow_id(tenant, conversation_id),
            "task_queue": TASK_QUEUE,
            "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
            "id_reuse_policy": reuse,
            "static_summary": f"conversation {conversation_id}",
        }

    def _conversation_start(
        self, tenant: str | None, conversation_id: str, carried: ConversationState | None = None
    ) -> ConversationStart:
        return ConversationStart(
            tenant=tenant,
            conversation_id=conversation_id,
            carried=carried,
            revision=CURRENT_REVISION,
            continue_as_new_after=self.continue_as_new_after,
            idle_close_after_s=(
                None if self.idle_close_after == IDLE_CLOSE_AFTER else self.idle_close_after.total_seconds()
            ),
        )

    async def _in_conversation(
        self, tenant: str | None, conversation_id: str, call: Callable[[], Awaitable[T]], wait_s: float = 0.0
    ) -> T:
        """Run a call that starts the conversation unless it runs, within `wait_s` and the guard's
        grace. A conversation closes after 30 idle days; the call is then refused (its start rejects a
        duplicate id), and the conversation is reopened with everything it kept (actions, channels,
        stream log) before the call is repeated, so a channel coming back later gets the same handoff,
        not an empty one."""
        try:
            return await self._guard(call, wait_s)
        except (WorkflowAlreadyStartedError, RPCError) as error:
            if isinstance(error, RPCError) and error.status is not RPCStatusCode.ALREADY_EXISTS:
                raise
        closed = self._conversation(tenant, conversation_id)
        try:
            kept = await self._guard(lambda: closed.query(ConversationWorkflow.state))
        except RPCError as error:
            if not _never_ran(error):
                raise
            kept = await self._guard(lambda: kept_from_history(self.client, closed))
        kept.last_activity_at = None  # idle from the reopening on
        await self._guard(
            lambda: self.client.start_workflow(
                ConversationWorkflow.run,
                self._conversation_start(tenant, conversation_id, kept),
                **self._conversation_options(tenant, conversation_id, WorkflowIDReusePolicy.ALLOW_DUPLICATE),
            )
        )
        return await self._guard(call)

    async def get(self, tenant: str | None, operation_id: str) -> ActionStatus:
        """The durable status: from the workflow's memo, which the server answers alone; from a query
        to a worker for runs that keep no memo (started before it) or whose first task is under way."""
        return await self._status(self._action(tenant, operation_id))

    async def _status(self, handle: WorkflowHandle[ActionWorkflow, ActionStatus]) -> ActionStatus:
        status = await self._memo_status(handle)
        if status is not None:
            return status
        return await self._guard(lambda: handle.query(ActionWorkflow.status))

    async def _memo_status(self, handle: WorkflowHandle[ActionWorkflow, ActionStatus]) -> ActionStatus | None:
        """The status in the run's memo (None before its first task completed, or for old runs)."""
        _, change = await self._guard(lambda: current(handle))
        return change[1] if change is not None else None

    async def _control(
        self, tenant: str | None, operation_id: str, name: str, update: Any, arg: Any
    ) -> ActionStatus:
        handle = self._action(tenant, operation_id)
        wait_s = getattr(arg, "wait_s", 0.0)
        try:
            status = await self._guard(lambda: handle.execute_update(update, arg), wait_s)
        except GatewayError as error:
            if error.code == "noop":
                # Nothing to change, but a caller who asked to wait still gets the verified outcome.
                return await self._await_verified(tenant, operation_id, wait_s)
            if error.code == "not_found" and await self._has_closed(handle):
                if name in _CLOSED_ANSWER:
                    message = "the action is settled and its record is closed"
                    raise GatewayError(_CLOSED_ANSWER[name], message) from None
                return await self.get(tenant, operation_id)
            raise
        return await self._maybe_taken(handle, status)

    async def _has_closed(self, handle: WorkflowHandle[Any, Any]) -> bool:
        """Whether the workflow exists and has closed: an update to a closed workflow is answered
        NOT_FOUND, like one to a workflow that never existed; its description tells them apart."""
        try:
            description = await self._guard(handle.describe)
        except GatewayError as error:
            if error.code == "not_found":
                return False
            raise
        return description.status is not WorkflowExecutionStatus.RUNNING

    async def _await_verified(self, tenant: str | None, operation_id: str, wait_s: float) -> ActionStatus:
        """The status once it is out of requested/running, or at the end of the wait (polled reads:
        this path runs only when the control itself changed nothing)."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            status = await self.get(tenant, operation_id)
            waiting_on_us = status.state is State.REQUESTED and not status.authorized
            if (
                status.state not in IN_PROGRESS
                or waiting_on_us
                or asyncio.get_running_loop().time() >= deadline
            ):
                return status
            await asyncio.sleep(NOOP_WAIT_POLL_S)

    async def authorize(
        self, tenant: str | None, operation_id: str, by: str | None, wait_s: float
    ) -> ActionStatus:
        return await self._control(
            tenant, operation_id, "authorize", ActionWorkflow.authorize, Authorize(by=by, wait_s=wait_s)
        )

    async def amend(self, tenant: str | None, operation_id: str, params: dict[str, Any]) -> ActionStatus:
        status = await self.get(tenant, operation_id)
        if status.dispatched and status.state not in SETTLED:
            # Refused here too, for a queued send a worker has taken: only Temporal records that, and
            # the amend would wait for the send's answer to learn it.
            raise GatewayError("already_dispatched", "a request may already have reached the business system")
        kind = self.kinds.get(status.kind)
        if kind is not None:
            try:
                validate_params(kind, params)
            except InvalidParams as error:
                raise GatewayError("invalid_params", str(error)) from None
        return await self._control(tenant, operation_id, "amend", ActionWorkflow.amend, Amend(params=params))

    async def cancel(
        self, tenant: str | None, operation_id: str, by: str | None, reason: str | None, wait_s: float
    ) -> ActionStatus:
        request = Cancel(by=by, reason=reason, wait_s=wait_s)
        return await self._control(tenant, operation_id, "cancel", ActionWorkflow.cancel, request)

    async def reconcile(self, tenant: str | None, operation_id: str, wait_s: float, why: str) -> ActionStatus:
        request = Reconcile(why=why, wait_s=wait_s)
        return await self._control(tenant, operation_id, "reconcile", ActionWorkflow.reconcile, request)

    async def presented(self, tenant: str | None, operation_id: str, present: Present) -> ActionStatus:
        return await self._control(tenant, operation_id, "presented", ActionWorkflow.presented, present)

    # -- conversations -------------------------------------------------------------------------

    async def conversation_event(
        self, tenant: str | None, conversation_id: str, event: ChannelEvent
    ) -> list[str]:
        """Record a channel event; for interruptions and openings, reconcile what may be in flight.
        While the event is recorded, the actions the conversation already holds are read from its
        history (the event may be its first workflow task, which then comes from the task queue) and
        the lookups of those in flight start: a lookup is safe before the event is durable, and the
        channel's next question is about them. The answer comes once both are done."""

        async def record() -> ChannelEventResult:
            start = WithStartWorkflowOperation(
                ConversationWorkflow.run,
                self._conversation_start(tenant, conversation_id),
                **self._conversation_options(tenant, conversation_id),
            )
            try:
                return await self.client.execute_update_with_start_workflow(
                    ConversationWorkflow.channel_event, event, start_workflow_operation=start
                )
            except Exception:
                # The start's own future holds the same failure (set before it is raised): retrieve it.
                await asyncio.gather(start.workflow_handle(), return_exceptions=True)
                raise

        recording = self._in_conversation(tenant, conversation_id, record)
        if event.type == "channel_closed":
            await recording
            return []
        why = f"{event.type} on {event.channel}"
        result, (looked_at, started) = await asyncio.gather(
            recording, self._reconcile_known(tenant, conversation_id, why)
        )
        # What the event's answer adds: actions tracked since the history was read, and actions of an
        # earlier release in flight by the conversation's own record.
        in_flight = set(result.reconcile) | set(started)
        rest = [op for op in result.tracked if op not in looked_at and op not in in_flight]
        statuses = await asyncio.gather(*(self._status_if_any(tenant, op) for op in rest))
        in_flight |= {
            op
            for op, status in zip(rest, statuses, strict=True)
            if self._may_be_in_flight(status, conversation_id)
        }
        late = [op for op in in_flight if op not in started]
        await asyncio.gather(*(self._look_up_soon(tenant, op, why) for op in late))
        return [op for op in result.tracked or result.reconcile if op in in_flight]

    async def _reconcile_known(
        self, tenant: str | None, conversation_id: str, why: str
    ) -> tuple[set[str], list[str]]:
        """(looked at, lookups started) for the actions the conversation's history names, each judged
        by its own record; nothing when the history cannot be read now (the event's answer names them)."""
        handle = self._conversation(tenant, conversation_id)
        try:
            kept = await self._guard(lambda: kept_from_history(self.client, handle))
        except GatewayError:
            return set(), []
        ops = kept.operation_ids
        statuses = await asyncio.gather(*(self._status_if_any(tenant, op) for op in ops))
        in_flight = [
            op
            for op, status in zip(ops, statuses, strict=True)
            if self._may_be_in_flight(status, conversation_id)
        ]
        await asyncio.gather(*(self._look_up_soon(tenant, op, why) for op in in_flight))
        return set(ops), in_flight

    @staticmethod
    def _may_be_in_flight(status: ActionStatus | None, conversation_id: str) -> bool:
        return (
            status is not None
            and status.conversation_id == conversation_id
            and status.state in MAY_BE_IN_FLIGHT
        )

    async def _look_up_soon(self, tenant: str | None, operation_id: str, why: str) -> None:
        """Start a lookup that the channel will ask about next: answered here once accepted, run in the
        background with the channel counted as waiting (so it may run inside the workflow task)."""
        handle = self._action(tenant, operation_id)
        request = Reconcile(why=why, wait_s=WAIT_MAX_S)
        try:
            await self._guard(
                lambda: handle.start_update(
                    ActionWorkflow.reconcile, request, wait_for_stage=WorkflowUpdateStage.ACCEPTED
                )
            )
        except GatewayError as error:
            if error.code not in ("noop", "not_found"):
                raise

    async def _status_if_any(self, tenant: str | None, operation_id: str) -> ActionStatus | None:
        """A tracked action's status; None when its start never happened (a crash between, or a
        conflict), or has not happened yet."""
        try:
            return await self.get(tenant, operation_id)
        except GatewayError as error:
            if error.code != "not_found":
                raise
            return None

    async def _view(self, tenant: str | None, conversation_id: str) -> ConversationView | None:
        """What the conversation keeps (None when there is none): by a query, or from its history for a
        run that has not run a workflow task (started lazily, or terminated before its first)."""
        handle = self._conversation(tenant, conversation_id)
        try:
            return await self._guard(lambda: handle.query(ConversationWorkflow.view))
        except GatewayError as error:
            if error.code == "not_found":
                return None
            raise
        except RPCError as error:
            if not _never_ran(error):
                raise
        kept = await self._guard(lambda: kept_from_history(self.client, handle))
        return ConversationView(
            conversation_id=conversation_id,
            operation_ids=kept.operation_ids,
            channels=kept.channels,
            seq=kept.seq,
        )

    async def handoff(self, tenant: str | None, conversation_id: str) -> Handoff:
        view = await self._view(tenant, conversation_id)
        if view is None:
            return build_handoff(conversation_id, Channels(), [], {})
        statuses = await asyncio.gather(*(self._status_if_any(tenant, op) for op in view.operation_ids))
        actions = [status for status in statuses if status and status.conversation_id == conversation_id]
        channels = Channels(**{name: record.state for name, record in view.channels.items()})
        reasons = {name: record.reason for name, record in view.channels.items() if record.reason}
        return build_handoff(conversation_id, channels, actions, reasons)

    async def conversation_actions(self, tenant: str | None, conversation_id: str) -> list[str]:
        """The operation ids of the conversation's actions, oldest first ([] while it has none)."""
        view = await self._view(tenant, conversation_id)
        return view.operation_ids if view is not None else []

    async def current_change(self, tenant: str | None, operation_id: str) -> tuple[int, ActionStatus] | None:
        """An action's current change number and status (None while it has none, or does not exist)."""
        try:
            return (await self._guard(lambda: current(self._action(tenant, operation_id))))[1]
        except GatewayError as error:
            if error.code != "not_found":
                raise
            return None

    def action_changes(
        self, tenant: str | None, operation_id: str, after: int | None
    ) -> AsyncIterator[tuple[int, ActionStatus]]:
        """Each durable change of an action after change number `after`, read from its own history
        (`settled.gateway.changes.action_changes`)."""
        return action_changes(self.client, self._action(tenant, operation_id), after)

    async def conversation_changes(
        self, tenant: str | None, conversation_id: str, idle_s: float = 1.0
    ) -> AsyncIterator[None]:
        """Yields once at once, then each time the conversation's history may have grown: a long poll
        of its history, which costs nothing while nothing changes (no query, no worker). A conversation
        that does not run (not started yet, closed, or between two runs) is looked at every `idle_s`."""
        handle = self._conversation(tenant, conversation_id)
        while True:
            try:
                described = await handle.describe()
            except RPCError:
                described = None
            yield
            if described is None or described.status is not WorkflowExecutionStatus.RUNNING:
                await asyncio.sleep(idle_s)
                continue
            seen = 0
            try:
                events = handle.fetch_history_events(wait_new_event=True, skip_archival=True)
                async for event in events:  # the history so far, then each new event as it comes
                    seen += 1
                    # The conversation's state changes when a workflow task completes: one look each.
                    if seen > described.history_length and event.event_type == TASK_COMPLETED:
                        yield
            except RPCError:
                await asyncio.sleep(idle_s)
            # The run closed (continued as new, or closed idle): look again at the current one.

    # -- health --------------------------------------------------------------------------------

    async def worker_polling(self) -> bool:
        """Whether a worker polls every task queue settled uses: the workflow queue and each kind's own
        (its business activities). The queues are described at once, not one after another."""
        queues = [self.pollers(TASK_QUEUE, workflows=True)] + [
            self.pollers(kind_task_queue(spec.name)) for spec in self.kinds
        ]
        return all(await asyncio.gather(*queues))

    async def pollers(self, queue: str, workflows: bool = False) -> set[str]:
        """The identities of the workers polling `queue` (its activity side, or its workflow side).

        A task queue is split into partitions, and the plain description reports only the root
        partition's pollers: a worker whose few polls wait on other partitions is missing from it.
        The enhanced description asks every partition."""
        from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue, TaskQueueVersionSelection
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

        side = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW if workflows else TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        request = DescribeTaskQueueRequest(
            namespace=self.settings.namespace,
            task_queue=TaskQueue(name=queue),
            api_mode=DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
            versions=TaskQueueVersionSelection(unversioned=True),
            task_queue_types=[side],
            report_pollers=True,
        )
        response = await self.client.workflow_service.describe_task_queue(
            request, timeout=timedelta(seconds=2)
        )
        return {
            poller.identity
            for version in response.versions_info.values()
            for info in version.types_info.values()
            for poller in info.pollers
        }

    # -- error mapping -------------------------------------------------------------------------

    async def _guard(self, call: Callable[[], Awaitable[T]], wait_s: float = 0.0) -> T:
        """Run a Temporal call and map its failures to the contract's codes. A call is answered within
        the caller's wait plus a grace: an update is answered only once a worker has run it, which
        under a backlog can be long after; the caller is then told to retry, not kept hanging."""
        try:
            return await asyncio.wait_for(call(), wait_s + self.answer_grace_s)
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            raise GatewayError(
                "temporal_unavailable",
                f"Temporal did not answer within {wait_s + self.answer_grace_s:g}s (busy); the call may have "
                "been recorded: repeat it (with the same operation_id) to learn the state",
            ) from None
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError) and cause.type:
                raise GatewayError(cause.type, cause.message) from None
            raise GatewayError("invalid_request", str(cause)) from None
        except (WorkflowQueryRejectedError, WorkflowQueryFailedError) as error:
            raise GatewayError("invalid_request", str(error)) from None
        except RPCError as error:
            if _unavailable(error):
                raise GatewayError(
                    "temporal_unavailable", f"Temporal is unavailable: {error.message}"
                ) from None
            if error.status is RPCStatusCode.NOT_FOUND:
                raise GatewayError("not_found", "no such operation or conversation") from None
            raise
