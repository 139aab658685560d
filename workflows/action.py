"""One workflow per consequential action: drives `ActionRecord` and owns nothing else.

The loop asks the record what to do, runs that activity, and feeds the answer back. Controls
arrive as updates whose validators refuse bad calls before history is touched. Every change is
mirrored to the memo (the status and its change number, which the API, the handoff and the stream
read), to the search attributes (for operators; since LEAN_REVISION only the states they act on,
`_mirror_state`), and to the workflow's current details (for the Temporal UI). Runs started
before `QUIET_REVISION` also signal each change to their conversation.

Runs started since the `IN_TASK_CALLS` patch make a quick business call inside the workflow task (a
local activity) when the record allows it (`ActionRecord.in_task`), publish once per workflow task,
and keep their latest status in the memo, so a status read is served by the Temporal server alone:
a confirmed booking then costs one workflow task instead of three, and reads cost no worker time.
Runs recorded before the patch replay the old command sequence unchanged.

A new action is started by a plain start (eager, in the API's own worker) that carries its creating
call's wait (`ActionStart.creating_wait_s`); a repeat registers by the `register` update. Runs of
`CLOSING_REVISION` close `close_after_settled_s` after the action settled, once nothing is pending,
and end with the whole record; a late control within the action's window opens a new run from it
(`ActionStart.carried` and `reopens`, settled.gateway.reopening), which closes again after its linger. Runs of
revision `PATCHED_REVISION` or later take every patched path without asking `workflow.patched`, so
their histories carry no patch markers.
"""

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime, timedelta
from typing import NoReturn, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType, ActivityHandle

with workflow.unsafe.imports_passed_through():
    from settled.activities.business import BusinessActivities
    from settled.activities.inputs import DISPATCH, SENDING, BusinessCall, lane_full
    from settled.workflows import meters
    from settled.workflows.messages import (
        CLOSING_REVISION,
        LEAN_REVISION,
        PATCHED_REVISION,
        QUEUE_REVISION,
        QUIET_REVISION,
        SERVICES_REVISION,
        STATUS_MEMO,
        TAKEN_MEMO,
        VERSION_MEMO,
        ActionChanged,
        ActionStart,
        Amend,
        Authorize,
        Cancel,
        Present,
        Reconcile,
        Register,
        Registered,
    )

    from settled.domain.machine import ActionRecord, ControlRefused
    from settled.domain.models import ActionStatus
    from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
    from settled.domain.states import IN_PROGRESS, MAY_BE_IN_FLIGHT, SETTLED, State
    from settled.temporal import visibility
    from settled.temporal.identity import conversation_workflow_id, kind_task_queue

T = TypeVar("T")
# Continue as new well before Temporal's own limits; the record carries everything over.
CONTINUE_AS_NEW_AFTER_EVENTS = 4000
# A write is sent once: Temporal must never retry it on its own (RFC 9110 §9.2.2).
SEND_ONCE = RetryPolicy(maximum_attempts=1)
# Lookups are safe to repeat when a worker dies mid-request.
LOOKUP_RETRIES = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200))
HEARTBEAT_TIMEOUT = timedelta(seconds=3)
IN_TASK_CALLS = "in-task-business-calls"
TRY_CANCEL = ActivityCancellationType.TRY_CANCEL
# Resolved only once Temporal answers the cancel: taken back, or too late (a worker had taken it).
WAIT_CANCELLATION_COMPLETED = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
# Runs recorded before it took an early authoritative 404 as "not applied"; their replay must too.
COMMIT_HORIZON = "commit-horizon"
# Runs started since this patch mirror needs_attention to the search attributes when it is set, not
# only at the next change of state (it is set while the state stays `unknown`).
ATTENTION_MIRRORED = "attention-mirrored"
# Runs started since this patch continue as new when retention redacts the params: the history so far
# holds them (the request, the calls), the next run's does not, and the closed run is deleted with the
# namespace's retention instead of staying open until the action closes.
CONTINUE_AFTER_REDACTION = "continue-after-redaction"


def _refusing(check: Callable[[], None]) -> None:
    """Run a validator's check of the record: a refusal fails the update before history is touched,
    with the refusal's code as the error's type (what the gateway answers)."""
    try:
        check()
    except ControlRefused as error:
        raise ApplicationError(error.message, type=error.code, non_retryable=True) from None


@workflow.defn(name="Action")
class ActionWorkflow:
    @workflow.init
    def __init__(self, start: ActionStart) -> None:
        self._current = start.revision >= PATCHED_REVISION
        # Runs of LEAN_REVISION keep one timer per deadline and mirror only the states operators act on.
        self._lean = start.revision >= LEAN_REVISION
        # Earlier runs signal their conversation on every change; quiet ones are read where they are.
        self._signals_conversation = start.revision < QUIET_REVISION
        # Runs of CLOSING_REVISION answer a control at once (no timer): the gateway awaits the outcome.
        self._answers_at_once = start.revision >= CLOSING_REVISION
        # Started by the creating call itself (eagerly, without an update), it registers that call.
        creating = start.creating_wait_s is not None
        self._record = start.carried or ActionRecord.started(start.new, workflow.now(), registered=creating)
        self._record.calls_in_task = self._patched(IN_TASK_CALLS)
        if start.carried is None:
            self._record.services_rules = start.revision >= SERVICES_REVISION
            self._record.start_marks_sending = start.revision >= QUEUE_REVISION
            self._record.closes_when_settled = start.revision >= CLOSING_REVISION
            self._record.lookup_in_send = start.revision >= LEAN_REVISION
            if start.creating_wait_s is not None:
                self._record.await_answer(workflow.now() + timedelta(seconds=start.creating_wait_s))
        elif start.reopens is not None:
            self._record.open_again(workflow.now())
        self._calling_in_task = False  # publishing waits for the call's answer: one batch, not two
        self._withdraw = False  # a cancel or an amend asks for the queued send back
        self._amending = False  # the loop sends nothing until the amend that took the send back is in
        self._taken_in_memo = False
        self._outbox: list[ActionStatus] = (
            [self._record.status()] if self._signals_conversation and not start.carried else []
        )
        self._noted_version = self._record.version
        self._published_state: State | None = State.REQUESTED if not start.carried else self._record.state
        self._counted_state = self._published_state
        self._lookups_stopped = False
        self._published_attention = self._record.needs_attention if start.carried else False
        # A reopened run's memo was given at its start, from the record it carries.
        self._mirrored_version = self._record.version if start.reopens is not None else -1
        self._mirror: asyncio.Task[None] | None = None
        self._closing = False
        self._deadline: tuple[datetime, asyncio.Task[None]] | None = None  # the loop's timer, and until when
        self._continue_as_new_after_events = start.continue_as_new_after or CONTINUE_AS_NEW_AFTER_EVENTS

    def _patched(self, patch_id: str) -> bool:
        """A patched path: taken at once by a run of the current revision, asked of history otherwise."""
        return self._current or workflow.patched(patch_id)

    # -- the driver ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: ActionStart) -> ActionStatus | ActionRecord:
        """The action's life. A run that closes when settled ends with its whole record (what a late
        control opens it again from); earlier runs end with its status."""
        record = self._record
        publisher = asyncio.create_task(self._publish_changes()) if self._signals_conversation else None
        if record.calls_in_task:
            self._mirror = asyncio.create_task(self._mirror_changes())
        started_redacted = record.params_redacted
        while True:
            if self._amending:
                await workflow.wait_condition(lambda: not self._amending)
            record.tick(workflow.now())
            self._changed()
            step = record.next_step(workflow.now())
            self._note_lookups_stopped()
            if step.action == "close":
                if not record.closes_when_settled or await self._nothing_came_before_closing():
                    break
                continue
            if record.params_redacted and not started_redacted and self._patched(CONTINUE_AFTER_REDACTION):
                await self._continue_as_new(start, publisher)
            if step.action == "dispatch":
                await self._dispatch()
            elif step.action == "lookup":
                await self._lookup()
            elif step.action == "compensate":
                await self._compensate()
            else:
                await self._wait(step.until)
            self._changed()
            if self._history_is_long():
                await self._continue_as_new(start, publisher)
        await self._drain(publisher)
        return record if record.closes_when_settled else record.status()

    async def _nothing_came_before_closing(self) -> bool:
        """Whether the run may close now: every control's handler has finished and none changed the
        record meanwhile (a cancel accepted as the linger ended must still be carried out here)."""
        version = self._record.version
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() or self._record.version != version
        )
        return self._record.version == version

    def _note_lookups_stopped(self) -> None:
        """Count once each time automatic lookups of an unknown action stop (restarted by `/reconcile`
        or an event, they may stop again)."""
        stopped = self._record.automatic_lookups_stopped(workflow.now())
        if stopped and not self._lookups_stopped:
            meters.count_lookups_stopped(self._record.kind.name)
        self._lookups_stopped = stopped

    async def _continue_as_new(self, start: ActionStart, publisher: asyncio.Task[None] | None) -> NoReturn:
        await self._drain(publisher)
        # The next run starts from the record; its input holds no params the record no longer has
        # (redacted by retention, or amended).
        new = start.new.model_copy(update={"params": self._record.params})
        update: dict[str, object] = {"new": new, "carried": self._record}
        if start.reopens is not None:
            update["reopens"] = None  # the next run goes on from this one: it is not opened again
        workflow.continue_as_new(start.model_copy(update=update))

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self._continue_as_new_after_events
        )

    async def _drain(self, publisher: asyncio.Task[None] | None) -> None:
        self._keep_deadline(None)  # the loop is over: its timer too
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self._outbox)
        self._closing = True
        if publisher is not None:
            await publisher
        if self._mirror is not None:
            await self._mirror

    async def _wait(self, until: datetime | None) -> None:
        """Until the record changes (a control, an answer) or `until` comes. Runs before LEAN_REVISION
        start a timer for every wait, so each change restarts it even when the deadline stays where it
        was (a `presented`, a repeat `register`); LEAN runs keep one timer per deadline
        (`_keep_deadline`)."""
        version = self._record.version
        if until is not None and until <= workflow.now():
            return
        if self._lean:
            timer = self._keep_deadline(until)
            await workflow.wait_condition(
                lambda: self._record.version != version or (timer is not None and timer.done())
            )
            return
        timeout = None if until is None else (until - workflow.now()).total_seconds()
        with suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._record.version != version, timeout=timeout)

    def _keep_deadline(self, until: datetime | None) -> asyncio.Task[None] | None:
        """The one timer that ends the loop's waits at `until`: kept across turns of the loop (and the
        calls between them) while the deadline is the same instant, replaced when it moves (a lookup's
        backoff, the end of the window of late controls once settled), cancelled when no deadline is
        needed. A new run (continue-as-new) starts its own."""
        if self._deadline is not None:
            kept_until, timer = self._deadline
            if kept_until == until and not timer.done():
                return timer
            timer.cancel()
            self._deadline = None
        if until is None:
            return None
        timer = asyncio.create_task(workflow.sleep(until - workflow.now()))
        self._deadline = (until, timer)
        return timer

    def _call(self) -> BusinessCall:
        record = self._record
        return BusinessCall(
            kind=record.kind,
            operation_key=record.operation_key,
            params=record.params,
            business_ref=record.business_ref,
            operation_id=record.operation_id,
            attempt=record.attempts,
            queued=record.queued and not record.start_marks_sending,
            from_queue=record.may_withdraw,
            look_up_if_lost=record.looks_up_lost_sends,
        )

    async def _business(
        self,
        activity: Callable[[BusinessActivities, BusinessCall], Awaitable[T]],
        retry: RetryPolicy,
        summary: str,
        lost: Callable[[str], T],
        withdrawn: Callable[[], T] | None = None,
    ) -> T:
        """Run a business activity; `lost` says what it means if it never finished (worker died, timeout).
        Inside the workflow task or on the shared queue (eagerly, where it can) while its kind has room
        there; refused (nothing sent: `lane_full`), on its kind's own queue (settled.activities.lanes).
        A send queued there may be taken back (`withdrawn`)."""
        timeout = timedelta(seconds=self._record.kind.timeout_s + 5)
        queue = None
        try:
            if self._record.in_task(activity.__name__, workflow.now()):
                self._calling_in_task = True
                try:
                    return await workflow.execute_local_activity_method(
                        activity,
                        self._call(),
                        start_to_close_timeout=timeout,
                        retry_policy=retry,
                        summary=summary,
                    )
                except (ActivityError, ApplicationError) as error:
                    if not lane_full(error):
                        raise
                    queue = self._kind_queue(activity.__name__)
                finally:
                    self._calling_in_task = False
            while True:
                # A send waiting in its kind's queue may be taken back (`_until_taken_back`).
                queued = queue is not None and withdrawn is not None and self._record.may_withdraw
                try:
                    # A killed worker is noticed by its heartbeat in seconds, not at the timeout.
                    handle = workflow.start_activity_method(
                        activity,
                        self._call(),
                        start_to_close_timeout=timeout,
                        retry_policy=retry,
                        summary=summary,
                        heartbeat_timeout=HEARTBEAT_TIMEOUT,
                        task_queue=queue,
                        cancellation_type=WAIT_CANCELLATION_COMPLETED if queued else TRY_CANCEL,
                    )
                    if queued and withdrawn is not None:
                        return await self._until_taken_back(handle, withdrawn)
                    return await handle
                except ActivityError as error:
                    if queue is not None or not lane_full(error):
                        raise
                    queue = self._kind_queue(activity.__name__)
        except ActivityError as error:
            return lost(str(error.cause))

    async def _until_taken_back(self, handle: ActivityHandle[T], withdrawn: Callable[[], T]) -> T:
        """A send waiting in its kind's queue, until answered or taken back. A cancel or an amend takes
        it back (`_withdraw`): Temporal cancels an activity no worker has taken at once, and refuses
        once one has (the worker then finishes the send and its answer comes as usual), so the record
        learns which without a task of its own."""
        try:
            await workflow.wait_condition(lambda: handle.done() or self._withdraw)
            if not handle.done():
                handle.cancel()
            try:
                return await handle
            except ActivityError as error:
                if isinstance(error.cause, CancelledError):
                    return withdrawn()
                raise
        finally:
            self._withdraw = False

    def _kind_queue(self, activity: str) -> str:
        """Where a call refused on the shared worker goes: its kind's own queue. A refused send of a run
        of SERVICES_REVISION waits there as `requested` (queued): nothing was sent."""
        record = self._record
        if activity == DISPATCH and record.services_rules:
            record.queue(workflow.now())
            self._changed()
        return kind_task_queue(record.kind.name)

    async def _dispatch(self) -> None:
        record = self._record
        record.begin_dispatch(workflow.now())
        self._changed()
        outcome = await self._business(
            BusinessActivities.dispatch,
            SEND_ONCE,
            f"send {record.kind.name} (attempt {record.attempts + 1})",
            # It may have been sent: verify, never re-send blindly.
            lambda why: DispatchOutcome(result="unknown", detail=f"the worker lost the request ({why})"),
            lambda: DispatchOutcome(result="withdrawn", detail="taken back from its kind's queue: not sent"),
        )
        if record.may_withdraw and outcome.result != "withdrawn":  # its worker took it, then answered
            record.apply_sending(outcome.taken_at or workflow.now())
        record.on_dispatch(outcome, workflow.now())

    async def _lookup(self) -> None:
        record = self._record
        asked_at = workflow.now()  # the request leaves after this: an earlier time is the safe side
        outcome = await self._business(
            BusinessActivities.lookup,
            LOOKUP_RETRIES,
            f"look up {self._record.kind.name}",
            lambda why: LookupOutcome(result="inconclusive", detail=f"the lookup did not finish ({why})"),
        )
        # Asked only where the rule changes the outcome, so other runs carry no patch marker.
        horizon = not record.too_soon_to_tell(outcome, asked_at) or self._patched(COMMIT_HORIZON)
        record.on_lookup(outcome, workflow.now(), asked_at=asked_at, horizon=horizon)

    async def _compensate(self) -> None:
        outcome = await self._business(
            BusinessActivities.compensate,
            SEND_ONCE,
            f"reverse {self._record.kind.name} {self._record.business_ref}",
            lambda why: CompensationOutcome(result="unknown", detail=f"the reversal did not finish ({why})"),
        )
        self._record.on_compensation(outcome, workflow.now())

    # -- publishing ----------------------------------------------------------------------------

    def _changed(self) -> None:
        """Queue a snapshot if the record changed since the last one, and mirror it for operators."""
        record = self._record
        if record.version == self._noted_version:
            return
        self._noted_version = record.version
        if self._signals_conversation:
            self._outbox.append(record.status())
        if record.state != self._counted_state:
            was_settled = self._counted_state in SETTLED
            self._counted_state = record.state
            meters.count_transition(record.kind.name, record.state)
            if record.settled and not was_settled:
                meters.time_outcome(record.kind.name, record.state, record.created_at, workflow.now())
            if not record.calls_in_task:
                self._mirror_state()
        last = record.log[-1].note if record.log else record.history[-1].note
        ref = f" · ref {record.business_ref}" if record.business_ref else ""
        workflow.set_current_details(
            f"**{record.state.value}**{ref} · attempts {record.attempts}\n\nlast: {last}"
        )

    def _mirror_state(self) -> None:
        """The state in the search attributes, for operators' queries (once per change of state).

        Each upsert is a billed Action, so runs of LEAN_REVISION write only what an operator acts on:
        `SettledState` shows the record's state as each workflow task ends, except a send's own
        `running` while that send is in flight (begun, its answer not recorded: minutes at most, by
        the kind's timeout), when it keeps what it showed before the send (`requested`, or `unknown`
        for a re-send) until the answer is recorded. So a send made by an activity writes once (its
        outcome), not twice. `running` is written when it outlasts the send: the service accepted the
        request and has not finished it. So an action that is not settled is never shown settled, one
        that is `unknown` always shows `unknown`, and `SettledNeedsAttention` is written whenever it
        changes."""
        record = self._record
        state = record.state
        if self._lean and state is State.RUNNING and not record.accepted:
            state = self._published_state or state  # not accepted: only its send's answer ends it
        attention_changed = record.needs_attention != self._published_attention
        if state == self._published_state and not (attention_changed and self._patched(ATTENTION_MIRRORED)):
            return
        self._published_state = state
        self._published_attention = record.needs_attention
        workflow.upsert_search_attributes(
            [
                visibility.STATE.value_set(state.value),
                visibility.NEEDS_ATTENTION.value_set(record.needs_attention),
            ]
        )

    async def _mirror_changes(self) -> None:
        """The latest status in the memo and the state in the search attributes, once per workflow
        task in which the record changed (after an in-task call, not before it)."""
        record = self._record

        def changed() -> bool:
            return (record.version != self._mirrored_version and not self._calling_in_task) or self._closing

        while True:
            await workflow.wait_condition(changed)
            if self._lean and not changed():
                # Woken in the same pass as the loop, which has since begun a call inside this task:
                # mirror its outcome, not the `running` the task will not end with.
                continue
            if record.version != self._mirrored_version:
                self._mirrored_version = record.version
                memo: dict[str, object] = {STATUS_MEMO: record.status()}
                if not self._signals_conversation:
                    memo[VERSION_MEMO] = record.version
                taken = record.once_taken()
                if taken is not None or self._taken_in_memo:
                    memo[TAKEN_MEMO] = taken  # None removes it
                    self._taken_in_memo = taken is not None
                workflow.upsert_memo(memo)
                self._mirror_state()
            if self._closing:
                return

    def _ready_to_publish(self) -> bool:
        return (bool(self._outbox) and not self._calling_in_task) or self._closing

    async def _publish_changes(self) -> None:
        """Send queued snapshots to the conversation, in order, batched per workflow task."""
        conversation = workflow.get_external_workflow_handle(
            conversation_workflow_id(self._record.tenant, self._record.conversation_id)
        )
        while True:
            if self._record.calls_in_task:
                await workflow.wait_condition(self._ready_to_publish)
            else:
                await workflow.wait_condition(lambda: bool(self._outbox) or self._closing)
            if not self._outbox:
                return
            batch, self._outbox = self._outbox, []
            try:
                await conversation.signal("action_changed", ActionChanged(statuses=batch))
            except Exception as error:  # the conversation is gone: the action itself is still right
                workflow.logger.warning("could not publish to the conversation: %s", error)

    # -- controls ------------------------------------------------------------------------------

    async def _answer_after(
        self, ready: Callable[[], bool], wait_s: float, waits_here: bool = False
    ) -> ActionStatus:
        """The status once `ready`, or at the end of the caller's wait. Runs of CLOSING_REVISION answer at
        once: a wait here would start a timer (a billed Action) even for an outcome that comes in this
        same task, so the gateway awaits the outcome by following the history instead (free). Unless
        `waits_here`: an outcome the history cannot show."""
        self._changed()
        if wait_s > 0 and (waits_here or not self._answers_at_once) and not ready():
            with suppress(TimeoutError):
                await workflow.wait_condition(ready, timeout=wait_s)
        return self._record.status()

    def _not_in_progress(self) -> bool:
        return self._record.state not in IN_PROGRESS

    @workflow.update
    async def register(self, request: Register) -> Registered:
        created = self._record.apply_register()
        self._record.await_answer(workflow.now() + timedelta(seconds=request.wait_s))
        status = await self._answer_after(self._not_in_progress, request.wait_s)
        return Registered(created=created, status=status)

    @register.validator
    def _check_register(self, request: Register) -> None:
        _refusing(lambda: self._record.check_register(request.kind, request.params, request.conversation_id))

    @workflow.update
    async def authorize(self, request: Authorize) -> ActionStatus:
        self._record.apply_authorize(request.by, workflow.now())
        self._record.await_answer(workflow.now() + timedelta(seconds=request.wait_s))
        return await self._answer_after(self._not_in_progress, request.wait_s)

    @authorize.validator
    def _check_authorize(self, request: Authorize) -> None:
        _refusing(self._record.check_authorize)

    @workflow.update
    async def amend(self, request: Amend) -> ActionStatus:
        record = self._record
        if record.may_withdraw:
            # Its worker may have taken the send already: take it back first, and amend only if it
            # was not taken.
            self._amending = self._withdraw = True
            try:
                await workflow.wait_condition(lambda: not record.queued)
            finally:
                self._amending = False
            _refusing(lambda: record.check_amend(request.params, workflow.now(), taken_back=True))
        record.apply_amend(request.params, workflow.now())
        return await self._answer_after(self._not_in_progress, 0)

    @amend.validator
    def _check_amend(self, request: Amend) -> None:
        _refusing(lambda: self._record.check_amend(request.params, workflow.now()))

    @workflow.update
    async def cancel(self, request: Cancel) -> ActionStatus:
        record = self._record
        record.apply_cancel(request.by, request.reason, workflow.now())
        if record.may_withdraw:
            self._withdraw = True  # cancelled once taken back; answered as usual if it was taken

        def resolved() -> bool:
            return record.state in (State.CANCELLED, State.FAILED) or (
                record.state is State.CONFIRMED and not record.compensation_pending
            )

        return await self._answer_after(resolved, request.wait_s)

    @cancel.validator
    def _check_cancel(self, request: Cancel) -> None:
        _refusing(self._record.check_cancel)

    @workflow.update
    async def reconcile(self, request: Reconcile) -> ActionStatus:
        record = self._record
        record.apply_reconcile(request.why, workflow.now())
        record.await_answer(workflow.now() + timedelta(seconds=request.wait_s))
        lookups = record.lookups

        def answered() -> bool:
            return (
                record.lookups > lookups
                or record.state not in MAY_BE_IN_FLIGHT
                or not record.lookup_requested
            )

        # Without a lookup, a request may end unrecorded (nothing can verify it): waited for here.
        return await self._answer_after(answered, request.wait_s, waits_here=not record.kind.has_lookup)

    @reconcile.validator
    def _check_reconcile(self, request: Reconcile) -> None:
        _refusing(lambda: self._record.check_reconcile(workflow.now()))

    @workflow.update
    async def presented(self, request: Present) -> ActionStatus:
        self._record.apply_presented(
            request.channel, request.text, request.completed, workflow.now(), request.for_state
        )
        return await self._answer_after(lambda: True, 0)

    @workflow.update(name=SENDING)
    async def sending(self) -> BusinessCall:
        """A queued send's worker takes it: recorded before anything leaves, answered with what to send
        (the params as they are now)."""
        self._record.apply_sending(workflow.now())
        self._changed()
        return self._call()

    @sending.validator
    def _check_sending(self) -> None:
        _refusing(self._record.check_sending)

    @workflow.query
    def status(self) -> ActionStatus:
        return self._record.status()

    @workflow.query
    def conflict(self, request: Register) -> str | None:
        """Why a repeated create would conflict (for records whose workflow has closed)."""
        try:
            self._record.check_register(request.kind, request.params, request.conversation_id)
        except ControlRefused as error:
            return error.message
        return None
