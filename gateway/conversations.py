"""A conversation's workflow: telling it of a new action, recording a channel's events (and looking up
what may be in flight), the handoff, its actions, and the changes its stream follows.

A conversation closes after its idle period (`SETTLED_CONVERSATION_IDLE_S`, an hour by default: its call
is over by then, and an idle month open cost storage for nothing); a handoff reads a closed one as it
reads a running one, and a call that finds it closed reopens it with everything it kept before the call
is repeated, so a channel coming back later gets the same handoff."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from settled.gateway.controls import Controls
from settled.gateway.errors import GatewayError, already_started, never_ran, unless_missing
from settled.gateway.kept import kept_from_history
from settled.gateway.link import Link, finishing
from settled.workflows.conversation import ConversationWorkflow
from settled.workflows.messages import (
    CURRENT_REVISION,
    ChannelEvent,
    ChannelEventResult,
    ConversationStart,
    ConversationState,
    ConversationView,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WithStartWorkflowOperation, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from settled.domain.handoff import Channels, Handoff, build_handoff
from settled.domain.models import ActionStatus, ConversationEventBody
from settled.domain.states import MAY_BE_IN_FLIGHT
from settled.temporal.identity import TASK_QUEUE, conversation_workflow_id

T = TypeVar("T")
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


def _may_be_in_flight(status: ActionStatus | None, conversation_id: str) -> bool:
    return (
        status is not None and status.conversation_id == conversation_id and status.state in MAY_BE_IN_FLIGHT
    )


class Conversations:
    def __init__(self, link: Link, controls: Controls) -> None:
        self.link = link
        self.controls = controls

    async def track(self, tenant: str | None, conversation_id: str, operation_id: str, wait_s: float) -> None:
        """Tell the conversation of a new action (starting it, lazily, unless it runs)."""

        def tell() -> Awaitable[WorkflowHandle[Any, Any]]:
            # Finished like the action's start: an action started after its caller gave up is in its
            # conversation too.
            return asyncio.shield(
                finishing(
                    self.link.client.start_workflow(
                        ConversationWorkflow.run,
                        self._start(tenant, conversation_id),
                        **self._options(tenant, conversation_id),
                        start_signal="track_action",
                        start_signal_args=[operation_id],
                        # Lazily: the start and the signal are durable at once, and a workflow task
                        # runs only once something needs it (another action, a channel event) or the
                        # idle period ends.
                        start_delay=self.link.idle_close_after,
                    )
                )
            )

        await self._in_conversation(tenant, conversation_id, tell, wait_s)

    async def event(self, tenant: str | None, conversation_id: str, body: ConversationEventBody) -> list[str]:
        """Record a channel event; for interruptions and openings, reconcile what may be in flight.
        While the event is recorded, the actions the conversation already holds are read from its
        history (the event may be its first workflow task, which then comes from the task queue) and
        the lookups of those in flight start: a lookup is safe before the event is durable, and the
        channel's next question is about them. The answer comes once both are done."""
        event = ChannelEvent(type=body.type, channel=body.channel, reason=body.reason)

        async def record() -> ChannelEventResult:
            start = WithStartWorkflowOperation(
                ConversationWorkflow.run,
                self._start(tenant, conversation_id),
                **self._options(tenant, conversation_id),
            )
            try:
                return await self.link.client.execute_update_with_start_workflow(
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
        statuses = await asyncio.gather(*(self._durable_status(tenant, op) for op in rest))
        read = dict(zip(rest, statuses, strict=True))
        in_flight |= {op for op, status in read.items() if _may_be_in_flight(status, conversation_id)}
        late = [op for op in in_flight if op not in started]
        await asyncio.gather(*(self.controls.look_up_soon(tenant, op, why, read.get(op)) for op in late))
        return [op for op in result.tracked or result.reconcile if op in in_flight]

    async def _reconcile_known(
        self, tenant: str | None, conversation_id: str, why: str
    ) -> tuple[set[str], list[str]]:
        """(looked at, lookups started) for the actions the conversation's history names, each judged
        by its own record; nothing when the history cannot be read now (the event's answer names them)."""
        handle = self.link.conversation(tenant, conversation_id)
        try:
            kept = await self.link.guard(lambda: kept_from_history(self.link.client, handle))
        except GatewayError:
            return set(), []
        ops = kept.state.operation_ids
        statuses = await asyncio.gather(*(self._durable_status(tenant, op) for op in ops))
        in_flight = {
            op: status
            for op, status in zip(ops, statuses, strict=True)
            if _may_be_in_flight(status, conversation_id)
        }
        await asyncio.gather(
            *(self.controls.look_up_soon(tenant, op, why, status) for op, status in in_flight.items())
        )
        return set(ops), list(in_flight)

    async def _durable_status(self, tenant: str | None, operation_id: str) -> ActionStatus | None:
        """A tracked action's status as its memo holds it, read from the server alone (no query, no
        Action); None before its first workflow task completed, when nothing of it can be in flight
        for a lookup to resolve (a send inside that task answers its own caller), or without a start."""
        return await unless_missing(self.link.memo_status(self.link.action(tenant, operation_id)))

    async def _status_if_any(self, tenant: str | None, operation_id: str) -> ActionStatus | None:
        """A tracked action's status; None when its start never happened (a crash between, or a
        conflict), or has not happened yet."""
        return await unless_missing(self.link.get(tenant, operation_id))

    async def _view(self, tenant: str | None, conversation_id: str) -> ConversationView | None:
        """What the conversation keeps (None when there is none), read from its history: running or
        closed, started lazily or not, nothing is asked of a worker (a query is a billed Action)."""
        handle = self.link.conversation(tenant, conversation_id)
        kept = await unless_missing(self.link.guard(lambda: kept_from_history(self.link.client, handle)))
        if kept is None:
            return None
        return ConversationView(
            conversation_id=conversation_id,
            operation_ids=kept.state.operation_ids,
            channels=kept.state.channels,
            seq=kept.state.seq,
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

    async def actions(self, tenant: str | None, conversation_id: str) -> list[str]:
        """The operation ids of the conversation's actions, oldest first ([] while it has none)."""
        view = await self._view(tenant, conversation_id)
        return view.operation_ids if view is not None else []

    async def changes(self, tenant: str | None, conversation_id: str, idle_s: float) -> AsyncIterator[None]:
        """Yields once at once, then each time the conversation's history may have grown: a long poll
        of its history, which costs nothing while nothing changes (no query, no worker). A conversation
        that does not run (not started yet, closed, or between two runs) is looked at every `idle_s`."""
        handle = self.link.conversation(tenant, conversation_id)
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

    def _options(
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

    def _start(
        self, tenant: str | None, conversation_id: str, carried: ConversationState | None = None
    ) -> ConversationStart:
        return ConversationStart(
            tenant=tenant,
            conversation_id=conversation_id,
            carried=carried,
            revision=CURRENT_REVISION,
            continue_as_new_after=self.link.continue_as_new_after,
            # Always given: the run keeps the period it started with, whatever the settings become.
            idle_close_after_s=self.link.idle_close_after.total_seconds(),
        )

    async def _in_conversation(
        self, tenant: str | None, conversation_id: str, call: Callable[[], Awaitable[T]], wait_s: float = 0.0
    ) -> T:
        """Run a call that starts the conversation unless it runs, within `wait_s` and the guard's
        grace. A conversation closes after its idle period; the call is then refused (its start rejects a
        duplicate id), and the conversation is reopened with everything it kept (actions, channels,
        stream log) before the call is repeated, so a channel coming back later gets the same handoff,
        not an empty one."""
        try:
            return await self.link.guard(call, wait_s)
        except (WorkflowAlreadyStartedError, RPCError) as error:
            if not already_started(error):
                raise
        closed = self.link.conversation(tenant, conversation_id)
        read = await self.link.guard(lambda: kept_from_history(self.link.client, closed))
        kept = read.state
        if not read.whole:  # the stream log of actions of an earlier release: the run's own to tell
            try:
                kept = await self.link.guard(lambda: closed.query(ConversationWorkflow.state))
            except RPCError as error:
                if not never_ran(error):  # a run terminated before its first task: its history is all
                    raise
        kept.last_activity_at = None  # idle from the reopening on
        await self.link.guard(
            lambda: self.link.client.start_workflow(
                ConversationWorkflow.run,
                self._start(tenant, conversation_id, kept),
                **self._options(tenant, conversation_id, WorkflowIDReusePolicy.ALLOW_DUPLICATE),
            )
        )
        return await self.link.guard(call)
