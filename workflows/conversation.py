"""One workflow per conversation: its channels, its actions, and the log the stream reads.

It never decides anything about an action. The API tells it of each new action once
(`track_action`); channels report events (`channel_event`). A conversation that a new action starts
is started with a delay as long as its idle period (`LAZY_REVISION`): its start and that first
`track_action` are recorded at once, and no workflow task runs until a channel event or another
action needs one; until then the API reads what it keeps from its history (`settled.gateway.kept`).
Closing a channel changes the channel, nothing else. Actions started before `QUIET_REVISION` also
publish their snapshots here (`action_changed`) into the log the stream read before it followed each
action's own history; the log is kept, bounded, for them and for their replay.
"""

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from settled.workflows.messages import (
        LAZY_REVISION,
        PATCHED_REVISION,
        ActionChanged,
        ChannelEvent,
        ChannelEventResult,
        ChannelRecord,
        ConversationStart,
        ConversationState,
        ConversationView,
        EventsSince,
        StreamEvent,
    )

    from settled.domain.models import ActionStatus, is_redacted, redacted_like
    from settled.domain.states import MAY_BE_IN_FLIGHT, SETTLED

# Runs started since this patch keep one idle timer, moved only when it fires, instead of cancelling
# and restarting it on every signal (two history events and a timer write per signal saved).
ONE_IDLE_TIMER = "one-idle-timer"
# Runs started since this patch close when they are due to close, even if their history is also long
# enough to continue as new (they continued as new, and the next run waited 30 more idle days).
IDLE_CLOSE_FIRST = "idle-close-first"
# Runs started since this patch continue as new once an action whose params this run's history holds
# (in its input or in a change it received) has them redacted: the next run's history holds none.
CONTINUE_AFTER_REDACTION = "continue-after-redaction"
# The stream's log keeps the newest snapshots: at most EVENT_LOG_LIMIT of them and EVENT_LOG_MAX_BYTES
# of JSON (always the newest one). Everything a conversation keeps is carried into its next run as one
# payload, and Temporal refuses payloads over 2 MiB: the log's bytes are bounded, not only its count,
# and the latest state of each action is kept as a summary without params or sentences. A stream
# reader that falls further behind than the log reaches is told so (`truncated`) and reads the
# handoff for the current state.
EVENT_LOG_LIMIT = 1000
EVENT_LOG_MAX_BYTES = 1024 * 1024
CONTINUE_AS_NEW_AFTER_EVENTS = 4000
# A conversation with nothing new for its idle period closes (nothing new: no channel event, no new
# action, no change from an action of an earlier release, which keeps it open until every such one
# settled). Closing loses nothing: the next call reopens it with what it kept. The period comes with the
# start (`idle_close_after_s`, an hour unless the API is configured otherwise); this is the period of
# runs started before the start carried it.
IDLE_CLOSE_AFTER = timedelta(days=30)


def _has_params(status: ActionStatus) -> bool:
    return bool(status.params) and not is_redacted(status)


def _size(event: StreamEvent) -> int:
    return len(event.model_dump_json())


def _summary(status: ActionStatus) -> ActionStatus:
    """What the conversation needs of an action's latest state (its state, for closing and for the
    reconciliation on events): the handoff reads each action's own record."""
    return status.model_copy(update={"params": {}, "say": "", "presented": None, "history": [], "log": []})


@workflow.defn(name="Conversation")
class ConversationWorkflow:
    @workflow.init
    def __init__(self, start: ConversationStart) -> None:
        self._state = start.carried or ConversationState()
        self._conversation_id = start.conversation_id
        self._activity = 0  # bumped by every signal and update, to restart the idle clock
        self._last_activity_at = self._state.last_activity_at or workflow.now()
        self._continue_as_new_after_events = start.continue_as_new_after or CONTINUE_AS_NEW_AFTER_EVENTS
        self._event_bytes = [_size(event) for event in self._state.events]  # the log's sizes, in order
        # Actions whose params this run's history holds, and whether one of them was redacted since.
        self._unredacted = {e.status.operation_id for e in self._state.events if _has_params(e.status)}
        self._redacted_here = False
        self._current = start.revision >= PATCHED_REVISION
        self._lazy = start.revision >= LAZY_REVISION and start.carried is None
        self._idle_close_after = (
            timedelta(seconds=start.idle_close_after_s) if start.idle_close_after_s else IDLE_CLOSE_AFTER
        )

    def _patched(self, patch_id: str) -> bool:
        """A patched path: taken at once by a run of the current revision, asked of history otherwise."""
        return self._current or workflow.patched(patch_id)

    def _touch(self) -> None:
        self._activity += 1
        self._last_activity_at = self._state.last_activity_at = workflow.now()

    def _may_close(self) -> bool:
        return all(status.state in SETTLED for status in self._state.latest.values())

    @workflow.run
    async def run(self, start: ConversationStart) -> None:
        started_at = workflow.info().workflow_start_time
        if self._lazy and workflow.now() >= started_at + self._idle_close_after:
            # Started lazily (its start delay is its idle period), and this first task ran because the
            # delay ran out: nothing has happened since the start, whose action it tracked just now.
            self._last_activity_at = self._state.last_activity_at = started_at
        if self._patched(ONE_IDLE_TIMER):
            idle = await self._until_idle_or_long()
            if not self._should_continue() or (idle and self._patched(IDLE_CLOSE_FIRST)):
                return
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(ConversationStart(**{**start.model_dump(), "carried": self._state}))
        while True:
            seen = self._activity
            try:
                await workflow.wait_condition(
                    lambda seen=seen: self._activity != seen or self._history_is_long(),
                    timeout=self._idle_close_after,
                )
            except TimeoutError:
                if self._may_close():
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    return
            if self._history_is_long():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(ConversationStart(**{**start.model_dump(), "carried": self._state}))

    async def _until_idle_or_long(self) -> bool:
        """Return when the history should continue as new (False), or when the conversation may close
        (True): idle for its idle period with every action settled. The timer is set for the earliest
        moment that can be true, and moved only when it fires early, never on a signal."""
        # A run continued from one idle for long already waits at least a moment, never a negative time.
        wake_at = max(self._last_activity_at + self._idle_close_after, workflow.now() + timedelta(seconds=1))
        while True:
            try:
                await workflow.wait_condition(self._should_continue, timeout=wake_at - workflow.now())
                if workflow.now() < self._last_activity_at + self._idle_close_after or not self._may_close():
                    return False
                # Long, and due to close as well (the timer fired in the same task).
                await workflow.wait_condition(workflow.all_handlers_finished)
                return True
            except TimeoutError:
                idle_at = self._last_activity_at + self._idle_close_after
                if workflow.now() < idle_at:
                    wake_at = idle_at  # something happened meanwhile: idle from then on
                elif self._may_close():
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    return True
                else:
                    wake_at = workflow.now() + self._idle_close_after  # an action still open keeps it

    def _should_continue(self) -> bool:
        return self._history_is_long() or self._redacted_here

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self._continue_as_new_after_events
        )

    @workflow.signal
    def track_action(self, operation_id: str) -> None:
        """Sent by the API before the action starts, so a handoff never misses a new action."""
        self._touch()
        if operation_id not in self._state.operation_ids:
            self._state.operation_ids.append(operation_id)

    @workflow.signal
    def action_changed(self, change: ActionChanged) -> None:
        self._touch()
        state = self._state
        for status in change.statuses:
            if status.operation_id not in state.operation_ids:
                state.operation_ids.append(status.operation_id)
            state.latest[status.operation_id] = _summary(status)
            state.seq += 1
            event = StreamEvent(seq=state.seq, status=status)
            state.events.append(event)
            self._event_bytes.append(_size(event))
            if is_redacted(status):
                self._redact_log(status)
                if status.operation_id in self._unredacted:
                    self._unredacted.discard(status.operation_id)
                    self._redacted_here = self._redacted_here or self._patched(CONTINUE_AFTER_REDACTION)
            elif status.params:
                self._unredacted.add(status.operation_id)
        self._trim_log()

    def _trim_log(self) -> None:
        """Drop the oldest snapshots beyond the log's count and byte bounds; the newest always stays."""
        events, sizes = self._state.events, self._event_bytes
        drop = max(0, len(events) - EVENT_LOG_LIMIT)
        total = sum(sizes[drop:])
        while total > EVENT_LOG_MAX_BYTES and drop < len(events) - 1:
            total -= sizes[drop]
            drop += 1
        del events[:drop]
        del sizes[:drop]

    def _redact_log(self, redacted: ActionStatus) -> None:
        """Earlier snapshots of an action whose params were redacted lose them too, with the sentences
        that may quote them: what was said, and what a channel presented."""
        for index, event in enumerate(self._state.events):
            status = event.status
            if status.operation_id != redacted.operation_id or status is redacted:
                continue
            event.status = redacted_like(status, redacted)
            self._event_bytes[index] = _size(event)

    @workflow.update
    def channel_event(self, event: ChannelEvent) -> ChannelEventResult:
        self._touch()
        self._state.channels.setdefault(event.channel, ChannelRecord()).apply(event)
        if event.type == "channel_closed":
            return ChannelEventResult(reconcile=[])
        in_flight = [op for op, status in self._state.latest.items() if status.state in MAY_BE_IN_FLIGHT]
        return ChannelEventResult(reconcile=in_flight, tracked=list(self._state.operation_ids))

    @workflow.query
    def state(self) -> ConversationState:
        """Everything it keeps: what the conversation is reopened with after it closed."""
        return self._state

    @workflow.query
    def view(self) -> ConversationView:
        return ConversationView(
            conversation_id=self._conversation_id,
            operation_ids=self._state.operation_ids,
            channels=self._state.channels,
            seq=self._state.seq,
        )

    @workflow.query
    def events_since(self, since: int) -> EventsSince:
        events = [event for event in self._state.events if event.seq > since]
        oldest = self._state.events[0].seq if self._state.events else self._state.seq + 1
        return EventsSince(
            seq=self._state.seq, events=events, truncated=since + 1 < oldest and since < self._state.seq
        )
