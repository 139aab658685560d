"""The action state machine: pure, typed, in one place (docs/reference.md).

`ActionRecord` is the durable state of one action. The workflow drives it: it asks `next_step`
what to do, performs the I/O, and feeds the business system's answer back (`on_dispatch`,
`on_lookup`, `on_compensation`). Controls (authorize, amend, cancel, reconcile, presented) have a
`check_*` that refuses a bad call before anything is recorded (the update validators) and an
`apply_*`. Time is always passed in, never read, so the workflow stays deterministic and the rules
can be tested without Temporal.
"""

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from settled.domain.canonical import earlier_params_digest, params_digest, same_params
from settled.domain.kinds import KindSpec
from settled.domain.models import (
    REDACTED_MARK,
    ActionStatus,
    Channel,
    HistoryEntry,
    LogEntry,
    Presented,
    TakenSend,
)
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.domain.say import say_for
from settled.domain.states import SETTLED, State, claim_for

LOG_LIMIT = 50
# Reconcile requests this soon after a lookup are answered by it: a burst of events is one lookup.
RECONCILE_COALESCE = timedelta(seconds=1)


# The refusal of a repeated create from a conversation the action does not belong to: an
# `operation_conflict` to a caller who sees the tenant, nothing at all to one who sees one conversation.
OTHER_CONVERSATION = "other_conversation"
# How a send's history entry begins while the send is in flight (`begin_dispatch`): every answer to it
# moves the action on with an entry of its own.
SENDING = "sending"


class ControlRefused(Exception):
    """A control that cannot apply. `code` is the contract's error code; "noop" means that the call
    is valid but changes nothing (answered 200 with the current status)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Step(BaseModel):
    """What the driver should do next. `wait` ends at `until` (None: only a control wakes it)."""

    action: Literal["dispatch", "lookup", "compensate", "wait", "close"]
    until: datetime | None = None


class NewAction(BaseModel):
    """Everything an action starts from; the workflow's input."""

    operation_id: str
    operation_key: str
    conversation_id: str
    tenant: str | None = None
    kind: KindSpec
    params: dict[str, Any]
    authorized: bool = False
    authorized_by: str | None = None
    # The creating caller reports what the person heard (a `presented` after speaking the outcome).
    # False for a door that never can (a platform's webhook, MCP): no linger waits for that report.
    reports_heard: bool = True


class ActionRecord(BaseModel):
    operation_id: str
    operation_key: str
    conversation_id: str
    tenant: str | None
    kind: KindSpec
    requested_digest: str
    params: dict[str, Any]
    params_redacted: bool = False
    state: State = State.REQUESTED
    authorized: bool = False
    authorized_by: str | None = None
    dispatched: bool = False
    attempts: int = 0
    business_ref: str | None = None
    reason: str | None = None
    cancel_requested: bool = False
    compensated: bool = False
    compensation_pending: bool = False
    needs_attention: bool = False
    reauthorization_needed: bool = False  # params changed after consent: the old consent is void
    presented: Presented | None = None
    history: list[HistoryEntry] = Field(default_factory=list)
    log: list[LogEntry] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    registrations: int = 0
    version: int = 0
    # Bookkeeping of the driver; not part of the public status.
    possibly_applied: bool = False  # a request may have been applied and no authority said otherwise
    resend_allowed: bool = False  # the next dispatch is safe (deduplicated, or authoritatively not applied)
    lookup_requested: bool = False
    lookups: int = 0
    last_lookup_at: datetime | None = None
    # When the last request that may have reached the service had surely been sent (its answer, or
    # the loss of it, was recorded then): the commit horizon runs from here.
    last_send_at: datetime | None = None
    checks: int = 0  # lookups and re-sends in the current unverified stretch, for the backoff
    connect_failures: int = 0
    retry_streak: int = 0  # consecutive sends that ended the way the one before them did
    first_dispatch_at: datetime | None = None
    lookups_from: datetime | None = None  # automatic lookups run for give_up_after_s from here
    next_check_at: datetime | None = None
    next_dispatch_at: datetime | None = None
    next_compensation_at: datetime | None = None
    compensation_attempts: int = 0
    settled_at: datetime | None = None
    # Set by the workflow for runs that may make quick business calls inside a workflow task (local
    # activities); off for runs recorded before that existed, so their replay is unchanged.
    calls_in_task: bool = False
    # Set by the workflow for runs started since the rules for real services (a reversal is a write
    # too, a send queued behind its kind's cap); off for runs recorded before, so their replay is unchanged.
    services_rules: bool = False
    # A send waits its turn in its kind's queue (its service has `max_in_flight` requests open): nothing
    # was sent; it is marked sending (`apply_sending`) before it leaves, or, since QUEUE_REVISION, as
    # of when the kind's worker took it (`start_marks_sending`).
    queued: bool = False
    # Set by the workflow for runs started since QUEUE_REVISION: a queued send is marked sending by
    # Temporal's own record that the kind's worker took it (the activity started), not by an update;
    # a cancel or an amend while it waits takes it back (`withdrawn`), which Temporal refuses once a
    # worker has taken it. Off for runs recorded before, so their replay is unchanged.
    start_marks_sending: bool = False
    # Set by the workflow for runs started since LEAN_REVISION: a send whose answer is lost asks its business
    # call to look the operation up once, right away (`looks_up_lost_sends`), and the lookup's answer is
    # recorded with the lost send's. Off for runs recorded before, so their replay is unchanged.
    lookup_in_send: bool = False
    # The service accepted the request and has not finished it: `running`, looked up until final.
    accepted: bool = False
    # When the last dispatch whose answer was lost was sent: a compensation waits out its horizon.
    lost_send_at: datetime | None = None
    # A compensation whose answer was lost, that cannot be re-sent blindly: looked up instead.
    compensation_check: bool = False
    compensation_sent_at: datetime | None = None
    first_compensation_at: datetime | None = None
    answer_awaited_until: datetime | None = None  # a caller waits for the verified outcome until then
    # Set by the workflow for runs started since CLOSING_REVISION: once settled, the run closes after
    # `close_after_settled_s` instead of staying open for the whole window of late controls
    # (`keep_open_after_settled_s`), and a late control opens it again from this record. Off for runs
    # recorded before, so their replay is unchanged.
    closes_when_settled: bool = False
    # When a late control last opened the closed action again: its run lingers from here.
    reopened_at: datetime | None = None
    # From `NewAction.reports_heard`: False, a run that closes when settled does not linger for a
    # `presented` that will never come (a late one still opens it again). True in every earlier record.
    reports_heard: bool = True

    # -- creation and status -------------------------------------------------------------------

    @classmethod
    def create(cls, new: NewAction, now: datetime) -> "ActionRecord":
        authorized = new.authorized or not new.kind.requires_authorization
        record = cls(
            operation_id=new.operation_id,
            operation_key=new.operation_key,
            conversation_id=new.conversation_id,
            tenant=new.tenant,
            kind=new.kind,
            requested_digest=params_digest(new.params),
            params=new.params,
            authorized=authorized,
            authorized_by=new.authorized_by if new.authorized else None,
            reports_heard=new.reports_heard,
            created_at=now,
            updated_at=now,
        )
        note = "recorded; waiting for authorization" if not authorized else "recorded"
        record.history.append(HistoryEntry(state=State.REQUESTED, at=now, note=note))
        return record

    @classmethod
    def started(cls, new: NewAction, now: datetime, registered: bool) -> "ActionRecord":
        """A new action's record as its run starts: `registered` when the creating call started the run
        itself, and is counted as the first registration. The workflow starts from it, and the creating
        call answers with its status while no worker has run the start."""
        record = cls.create(new, now)
        if registered:
            record.apply_register()
        return record

    def status(self) -> ActionStatus:
        return ActionStatus(
            operation_id=self.operation_id,
            conversation_id=self.conversation_id,
            kind=self.kind.name,
            params=self.params,
            state=self.state,
            authorized=self.authorized,
            dispatched=self.dispatched,
            attempts=self.attempts,
            business_ref=self.business_ref,
            reason=self.reason,
            cancel_requested=self.cancel_requested,
            compensated=self.compensated,
            needs_attention=self.needs_attention,
            claim=claim_for(self.state),
            say=say_for(self),
            presented=self.presented,
            history=self.history,
            updated_at=self.updated_at,
            log=self.log,
            compensating=self.compensation_pending,
        )

    def open_again(self, now: datetime) -> None:
        """A late control opens the closed action again (a new run from this record): it lingers from
        now. Nothing the status shows changes."""
        self.reopened_at = now

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    @property
    def waiting_for_authorization(self) -> bool:
        return self.state is State.REQUESTED and not self.authorized

    # -- recording -----------------------------------------------------------------------------

    def _move(self, state: State, now: datetime, note: str) -> None:
        self.state = state
        self.history.append(HistoryEntry(state=state, at=now, note=note))
        if state in SETTLED and self.settled_at is None:
            self.settled_at = now
            self.needs_attention = False
            self.possibly_applied = False
            self.lookup_requested = False
        self._touch(now)

    def _note(self, now: datetime, event: str, note: str) -> None:
        self.log.append(LogEntry(at=now, event=event, note=note))
        del self.log[:-LOG_LIMIT]
        self._touch(now)

    def _touch(self, now: datetime) -> None:
        self.updated_at = now
        self.version += 1

    def _backoff(self, failures: int, cap_s: float) -> timedelta:
        initial = self.kind.reconcile_initial_interval_s
        return timedelta(seconds=min(initial * 2 ** min(failures, 30), max(cap_s, initial)))

    # -- what to do next -----------------------------------------------------------------------

    def tick(self, now: datetime) -> None:
        """Apply what time alone changes: the attention flag and the redaction of params."""
        if (
            not self.settled
            and not self.needs_attention
            and not self.accepted
            and self.first_dispatch_at is not None
            and now >= self._attention_at()
        ):
            self.needs_attention = True
            self._note(
                now, "needs_attention", f"not settled {self.kind.attention_after_s:g}s after the first send"
            )
        redact_at = self._redact_at()
        if redact_at is not None and now >= redact_at and not self.params_redacted:
            self._redact_presented()
            self.params = dict.fromkeys(self.params, REDACTED_MARK)
            self.params_redacted = True
            self._note(now, "redacted", "params redacted by the retention rule")

    def _redact_presented(self) -> None:
        """What a channel presented quotes the params too: its text goes with them. Which outcome it
        presented is kept, so the handoff does not say again what was fully said before."""
        presented = self.presented
        if presented is None:
            return
        for_state = presented.for_state
        if (
            for_state is None
            and presented.state is self.state
            and presented.text.strip() == say_for(self).strip()
        ):
            for_state = presented.state
        self.presented = presented.model_copy(update={"text": REDACTED_MARK, "for_state": for_state})

    def _attention_at(self) -> datetime:
        assert self.first_dispatch_at is not None
        return self.first_dispatch_at + timedelta(seconds=self.kind.attention_after_s)

    def _redact_at(self) -> datetime | None:
        if self.settled_at is None or self.kind.redact_params_after_s is None:
            return None
        return self.settled_at + timedelta(seconds=self.kind.redact_params_after_s)

    def late_controls_until(self) -> datetime:
        """Until when a settled action accepts late controls (a cancel, a presentation)."""
        assert self.settled_at is not None
        return self.settled_at + timedelta(seconds=self.kind.keep_open_after_settled_s)

    def _close_at(self) -> datetime:
        """When a settled action's run closes: at the end of its window of late controls, or, for a run
        that closes when settled, a fixed linger after it settled (or was opened again), which a control
        does not move. A creating caller that never reports what was heard gets no linger after the
        settling (a run opened again lingers as any other). Params due to be redacted within the window
        keep it open until they are (then it closes, its memo and its record without them); it never
        outlasts the window."""
        window_ends = self.late_controls_until()
        if not self.closes_when_settled:
            return window_ends
        assert self.settled_at is not None
        lingers_from = max(self.settled_at, self.reopened_at or self.settled_at)
        linger_s = self.kind.close_after_settled_s
        if not self.reports_heard and self.reopened_at is None:
            linger_s = 0.0
        close_at = lingers_from + timedelta(seconds=linger_s)
        redact_at = self._redact_at()
        if redact_at is not None and not self.params_redacted:
            close_at = max(close_at, redact_at)
        return min(close_at, window_ends)

    def _automatic_lookups_over(self, now: datetime) -> bool:
        start = self.lookups_from or self.first_dispatch_at or now
        return now >= start + timedelta(seconds=self.kind.give_up_after_s)

    def automatic_lookups_stopped(self, now: datetime) -> bool:
        """An unknown action that only lookups can verify, whose automatic lookups are over
        (`give_up_after_s`) and that no one asked to look up again."""
        return (
            self.state is State.UNKNOWN
            and self.kind.has_lookup
            and not self.lookup_requested
            and self._automatic_lookups_over(now)
        )

    def next_step(self, now: datetime) -> Step:
        wakes: list[datetime] = []
        if (
            self.first_dispatch_at is not None
            and not self.settled
            and not self.needs_attention
            and not self.accepted
        ):
            wakes.append(self._attention_at())

        if self.state is State.REQUESTED:
            if not self.authorized:
                return self._wait(wakes)
            if self.next_dispatch_at is None or now >= self.next_dispatch_at:
                return Step(action="dispatch")
            return self._wait([*wakes, self.next_dispatch_at])

        if self.state is State.UNKNOWN:
            if self.resend_allowed and not self.cancel_requested:
                return Step(action="dispatch")
            due = self.lookup_requested or (
                self.next_check_at is not None
                and now >= self.next_check_at
                and not self._automatic_lookups_over(now)
            )
            if due and self.kind.has_lookup:
                return Step(action="lookup")
            if due and self.resend_safe(now) and not self.cancel_requested:
                return Step(action="dispatch")
            if due:
                # Nothing here can verify it: no lookup, and a re-send is not safe. Wait for a person.
                self.lookup_requested = False
                self.next_check_at = None
            if self.next_check_at is not None and not self._automatic_lookups_over(now):
                wakes.append(self.next_check_at)
            return self._wait(wakes)

        if self.state is State.RUNNING:
            assert self.accepted, "next_step while a dispatch is in flight"
            # Accepted, not finished: looked up with backoff until the service gives a final answer.
            if self._lookup_due(now):
                return Step(action="lookup")
            if self.next_check_at is not None and not self._automatic_lookups_over(now):
                wakes.append(self.next_check_at)
            return self._wait(wakes)

        # Settled.
        if self.state is State.CONFIRMED and self.compensation_pending and self.compensation_check:
            if self._lookup_due(now):
                return Step(action="lookup")
            if self.next_check_at is not None:
                wakes.append(self.next_check_at)
        elif self.state is State.CONFIRMED and self.compensation_pending:
            if self.next_compensation_at is None or now >= self.next_compensation_at:
                return Step(action="compensate")
            wakes.append(self.next_compensation_at)
        close_at = self._close_at()
        if now >= close_at and not self.compensation_pending:
            return Step(action="close")
        wakes.append(close_at)
        redact_at = self._redact_at()
        if redact_at is not None and not self.params_redacted:
            wakes.append(redact_at)
        return self._wait(wakes)

    def _lookup_due(self, now: datetime) -> bool:
        return self.kind.has_lookup and (
            self.lookup_requested
            or (
                self.next_check_at is not None
                and now >= self.next_check_at
                and not self._automatic_lookups_over(now)
            )
        )

    def resend_safe(self, now: datetime) -> bool:
        """A re-sent dispatch cannot apply twice: the kind deduplicates and, where the service forgets
        keys (`idempotency_window_s`), the re-send reaches it well inside the window of the first send."""
        kind = self.kind
        if not kind.deduplicates:
            return False
        if kind.idempotent or kind.handler is not None or kind.idempotency_window_s is None:
            return True
        return self._inside_window(self.first_dispatch_at, now)

    def _inside_window(self, first: datetime | None, now: datetime) -> bool:
        window = self.kind.idempotency_window_s
        if window is None or first is None:
            return True
        return now + timedelta(seconds=self.kind.timeout_s) < first + timedelta(seconds=window)

    def _compensation_resend_safe(self, now: datetime) -> bool:
        kind = self.kind
        if not kind.compensation_deduplicates:
            return False
        keyed = (
            kind.handler is None
            and kind.compensate is not None
            and kind.compensate.method not in ("DELETE", "PUT")
        )
        return not keyed or self._inside_window(self.first_compensation_at, now)

    def _compensation_from(self, now: datetime) -> datetime:
        """When a compensation may be sent: once every dispatch whose answer was lost (one that may
        still land) is past the commit horizon, so a late write cannot land after its own reversal."""
        if not self.services_rules or self.lost_send_at is None:
            return now
        return max(now, self.lost_send_at + timedelta(seconds=self.kind.commit_horizon_s))

    @staticmethod
    def _wait(wakes: list[datetime]) -> Step:
        return Step(action="wait", until=min(wakes) if wakes else None)

    # -- where a business call runs ------------------------------------------------------------

    def await_answer(self, until: datetime) -> None:
        """A control's caller waits for the verified outcome until `until` (its `wait`)."""
        if self.answer_awaited_until is None or until > self.answer_awaited_until:
            self.answer_awaited_until = until

    @property
    def _may_send_in_task(self) -> bool:
        """A write may be sent inside a workflow task, where nothing durable says it was sent until its
        answer is recorded: only to a service that deduplicates (a retried task's repeat is harmless)
        and that can say authoritatively whether a write was applied (so a cancel can be resolved)."""
        kind = self.kind
        return self.calls_in_task and kind.deduplicates and kind.authoritative_lookup

    def in_task(self, action: str, now: datetime) -> bool:
        """Whether the call runs inside the workflow task (a local activity): one task instead of three,
        but status reads wait for it and nothing durable marks it begun. So only when a caller is
        waiting for this answer anyway, at least as long as the call may take, and the call is safe
        to repeat if the task is retried (a lookup always is; a write, per `_may_send_in_task`)."""
        awaited = self.answer_awaited_until
        if not self.calls_in_task or awaited is None:
            return False
        if awaited < now + timedelta(seconds=self.kind.timeout_s):
            return False
        return action == "lookup" or (action == "dispatch" and self._may_send_in_task)

    def _send_may_be_unrecorded(self, now: datetime) -> bool:
        """A send inside a workflow task that never completed (its worker died) leaves the record, as
        replayed, `requested` and due, though the request may have reached the service. A control seen
        in that state must not take it for "nothing was sent"."""
        due = self.next_dispatch_at is None or now >= self.next_dispatch_at
        return (
            self._may_send_in_task
            and self.state is State.REQUESTED
            and self.authorized
            and due
            and not self.queued
        )

    # -- the business system's answers ---------------------------------------------------------

    def begin_dispatch(self, now: datetime) -> None:
        resend = self.attempts > 0
        self.dispatched = True
        self.resend_allowed = False
        if self.first_dispatch_at is None:
            self.first_dispatch_at = now
        if self.state is State.UNKNOWN:
            self.checks += 1
        again = f"{SENDING} again with the same key" if self.kind.idempotency_header else f"{SENDING} again"
        note = f"{again} (attempt {self.attempts + 1})" if resend else SENDING
        self._move(State.RUNNING, now, note)

    def queue(self, now: datetime) -> None:
        """The send just begun was refused before anything left (its kind has no room): it waits in its
        kind's queue, durably, and the action is as it was before the send — `requested` (queued), or
        `unknown` where an earlier request may stand."""
        assert self.state is State.RUNNING and self.history[-1].state is State.RUNNING
        self.history.pop()
        self.state = self.history[-1].state
        self.dispatched = self.attempts > 0
        self.queued = True
        self._note(now, "queued", "its service has as many requests of this kind open as it may: queued")

    def once_taken(self) -> TakenSend | None:
        """While a send waits in its kind's queue (`start_marks_sending`): what the action is once the
        kind's worker takes it, for reads to show from then until its answer is recorded."""
        if not (self.queued and self.start_marks_sending):
            return None
        taken = self.model_copy(deep=True)
        taken.apply_sending(self.updated_at)
        status = taken.status()
        return TakenSend(state=status.state, claim=status.claim, say=status.say, note=taken.history[-1].note)

    @property
    def may_withdraw(self) -> bool:
        """Whether a queued send may still be taken back: it waits, and Temporal marks it taken."""
        return self.queued and self.start_marks_sending

    @property
    def looks_up_lost_sends(self) -> bool:
        """Whether a send asks its business call to look the operation up when its answer is lost: only
        where a lookup exists (a kind without one is left as it was)."""
        return self.lookup_in_send and self.kind.has_lookup

    def check_sending(self) -> None:
        if not self.queued:
            raise ControlRefused("noop", "no send is queued")
        if self.cancel_requested:
            raise ControlRefused("cancelled", "cancelled while it waited its turn: not sent")
        if not self.authorized:
            raise ControlRefused("not_authorized", "its authorization was withdrawn while it waited its turn")

    def apply_sending(self, now: datetime) -> None:
        """The kind's worker takes the queued send: from now on it may reach the service."""
        self.queued = False
        self.begin_dispatch(now)

    def on_dispatch(self, outcome: DispatchOutcome, now: datetime) -> None:
        """Record a send's answer. A lost one that its call looked up at once (`outcome.lookup`) stays
        in the history as `unknown`, and what that lookup found follows (`_looked_up_at_once`)."""
        self.queued = False
        if self.settled:  # a queued send refused because the action was cancelled meanwhile
            self._note(now, "dispatch", outcome.detail)
            return
        if outcome.may_have_reached:
            self.attempts += 1
            self.last_send_at = now
        match outcome.result:
            case "confirmed":
                self.business_ref = outcome.business_ref
                self.reason = None
                self._confirmed(now, outcome.detail)
            case "pending":
                self._accepted(outcome.business_ref, now, outcome.detail)
            case "rejected":
                self.reason = outcome.detail
                self._move(State.FAILED, now, outcome.detail)
            case "not_sent":
                self.connect_failures += 1
                delay = self._backoff(self.connect_failures - 1, self.kind.connect_retry_max_interval_s)
                if self.possibly_applied:
                    # An earlier request may stand: this is still unverified, not "not sent".
                    self.reason = outcome.detail
                    self.next_check_at = now + delay
                    self._retry_ended(State.UNKNOWN, now, outcome.detail)
                elif self.cancel_requested:
                    self._move(State.CANCELLED, now, "cancelled; nothing had reached the service")
                else:
                    # No request of this action has reached the service: it is not dispatched yet
                    # (an amend is still safe while it waits to retry the connection).
                    self.dispatched = self.attempts > 0
                    self.next_dispatch_at = now + delay
                    self.resend_allowed = True
                    self._retry_ended(
                        State.REQUESTED, now, f"{outcome.detail}; retrying in {delay.total_seconds():g}s"
                    )
            case "withdrawn" if self.cancel_requested and self.state is State.REQUESTED:
                self._move(State.CANCELLED, now, "cancelled while it waited its turn: nothing was sent")
            case "withdrawn":
                self._note(now, "withdrawn", outcome.detail)
            case "unknown":
                self.possibly_applied = True
                self.lost_send_at = now
                self.reason = outcome.detail
                self.next_check_at = now + self._backoff(self.checks, self.kind.reconcile_max_interval_s)
                self._retry_ended(State.UNKNOWN, now, outcome.detail)
                if outcome.lookup is not None:
                    self._looked_up_at_once(outcome.lookup, now)

    def _looked_up_at_once(self, lookup: LookupOutcome, now: datetime) -> None:
        """The lookup a send's own call made the moment its answer was lost (counted as asked then).
        Found (applied, accepted and unfinished, or ended unapplied), it is the service's word,
        recorded by the usual rules. Not found or not answered, it concludes nothing: the action goes
        on as any lost answer does, looked up after the same first backoff, so a re-send, where one is
        safe, never comes sooner for it (a service that keeps losing answers is not sent to in a tight
        loop); a 404 inside the commit horizon brings the next lookup to the horizon's end at the
        latest, as any early 404 does. Nor does it answer a `/reconcile` that follows: that one looks
        again at once, as it would have after the lost answer alone."""
        if lookup.result in ("applied", "pending", "rejected"):
            self.on_lookup(lookup, now)
            return
        self.lookups += 1
        self.lookup_requested = False
        note = f"{lookup.detail}, right after the answer was lost: looking again"
        horizon = self.commit_horizon()
        if self.too_soon_to_tell(lookup, now) and horizon is not None:
            note += f" (a write may commit up to {self.kind.commit_horizon_s:g}s after it was sent)"
            if self.next_check_at is None or horizon < self.next_check_at:
                self.next_check_at = horizon
        self._note(now, "lookup", note)

    def _retry_ended(self, state: State, now: datetime, note: str) -> None:
        """A send that ended where the previous one did is folded into it, so a service that stays down
        for a day leaves two history entries, not thousands (the log keeps each try)."""
        history = self.history
        repeat = len(history) >= 3 and history[-1].state is State.RUNNING and history[-2].state is state
        if not repeat:
            self.retry_streak = 0
            self._move(state, now, note)
            return
        self.retry_streak += 1
        history.pop()
        history[-1] = HistoryEntry(
            state=state, at=now, note=f"{note} (again, {self.retry_streak + 1} tries in a row)"
        )
        self.state = state
        self._note(now, "retry", note)

    def _accepted(self, business_ref: str | None, now: datetime, detail: str) -> None:
        """The service accepted it and is finishing it: `running` until a lookup finds it final."""
        self.accepted = True
        self.possibly_applied = True
        self.business_ref = business_ref or self.business_ref
        self.reason = None
        self.next_check_at = now + self._backoff(self.checks, self.kind.reconcile_max_interval_s)
        if self.state is not State.RUNNING or self.history[-1].note != detail:
            self._move(State.RUNNING, now, detail)
        else:
            self._touch(now)

    def _confirmed(self, now: datetime, detail: str) -> None:
        self.accepted = False
        self._move(State.CONFIRMED, now, detail)
        if self.cancel_requested:
            if self.kind.compensable:
                self.compensation_pending = True
                self.next_compensation_at = self._compensation_from(now)
            else:
                self._note(now, "cancel_too_late", "it was applied before the cancel and cannot be reversed")

    def commit_horizon(self) -> datetime | None:
        """Until when a request that may have reached the service could still be committed there."""
        if self.last_send_at is None:
            return None
        return self.last_send_at + timedelta(seconds=self.kind.commit_horizon_s)

    def too_soon_to_tell(self, outcome: LookupOutcome, asked_at: datetime) -> bool:
        """Whether an authoritative "not applied" came from a lookup made inside the commit horizon:
        the write may still land (a request still being processed, a queue, a lagging replica), so it
        proves nothing yet. This is the one place that decides; every conclusion follows it."""
        horizon = self.commit_horizon()
        return outcome.result == "not_applied" and horizon is not None and asked_at < horizon

    def on_lookup(
        self, outcome: LookupOutcome, now: datetime, asked_at: datetime | None = None, horizon: bool = True
    ) -> None:
        """Record a lookup's answer. `asked_at` is when it was made (default `now`); a "not applied"
        asked inside the commit horizon is inconclusive: the lookups go on at their usual backoff (a
        write that lands meanwhile is found, and confirmed, at the next one), and one comes at the
        latest when the horizon has passed, where a "not applied" is conclusive. `horizon=False` only
        replays runs recorded before the commit horizon existed."""
        asked_at = now if asked_at is None else asked_at
        if self.compensation_check:
            self._reversal_checked(outcome, now, asked_at)
            return
        if horizon and self.too_soon_to_tell(outcome, asked_at):
            horizon_at = self.commit_horizon()
            assert horizon_at is not None
            outcome = LookupOutcome(
                result="inconclusive",
                status_code=outcome.status_code,
                detail=f"{outcome.detail}, but a request sent at most {self.kind.commit_horizon_s:g}s "
                "earlier may still be committing; looking again, and a 404 counts only after that",
            )
            self._lookup_answered(outcome, now, look_by=horizon_at)
            return
        self._lookup_answered(outcome, now)

    def _lookup_answered(
        self, outcome: LookupOutcome, now: datetime, look_by: datetime | None = None
    ) -> None:
        """`look_by`: the next lookup comes by then at the latest (the commit horizon's end)."""
        self.lookups += 1
        self.last_lookup_at = now
        self.lookup_requested = False
        self.checks += 1
        self._note(now, "lookup", outcome.detail)
        match outcome.result:
            case "applied":
                self.business_ref = outcome.business_ref or self.business_ref
                self.reason = None
                self._confirmed(now, outcome.detail)
            case "pending":
                self._accepted(outcome.business_ref, now, "the service accepted it and is finishing it")
            case "rejected":
                self.accepted = False
                self.possibly_applied = False
                self.reason = outcome.detail
                self._move(State.FAILED, now, outcome.detail)
            case "not_applied":
                self.possibly_applied = False
                if self.accepted:  # accepted once, now authoritatively gone: as any write not applied
                    self.accepted = False
                    self._move(State.UNKNOWN, now, outcome.detail)
                if self.cancel_requested:
                    self._move(State.CANCELLED, now, f"{outcome.detail}; cancelled")
                else:
                    self.resend_allowed = True
            case "inconclusive" if self.accepted:
                self.next_check_at = self._next_check(now, look_by)
            case "inconclusive":
                self.reason = outcome.detail
                if self.resend_safe(now) and not self.cancel_requested:
                    self.resend_allowed = True
                self.next_check_at = self._next_check(now, look_by)

    def _next_check(self, now: datetime, look_by: datetime | None, failures: int | None = None) -> datetime:
        """The next lookup: after the usual backoff (at most `reconcile_max_interval_s`; `failures`
        tries so far, default the lookups'), and no later than `look_by`."""
        tries = self.checks if failures is None else failures
        after_backoff = now + self._backoff(tries, self.kind.reconcile_max_interval_s)
        return after_backoff if look_by is None else max(now, min(after_backoff, look_by))

    def _reversal_checked(self, outcome: LookupOutcome, now: datetime, asked_at: datetime) -> None:
        """A lookup after a compensation whose answer was lost: gone or reversed means it was reversed;
        still standing past the horizon of the compensation means it may be sent again."""
        self.lookups += 1
        self.last_lookup_at = now
        self.lookup_requested = False
        self._note(now, "lookup", outcome.detail)
        if outcome.result == "not_applied" or outcome.reversed:
            self.compensation_check = False
            self._compensated(now, "the lookup finds it reversed")
            return
        assert self.compensation_sent_at is not None
        horizon = self.compensation_sent_at + timedelta(seconds=self.kind.commit_horizon_s)
        if outcome.result != "inconclusive" and asked_at >= horizon:
            self.compensation_check = False
            self.next_compensation_at = now
            self._note(
                now, "compensation", "still standing past the horizon of the reversal: sending it again"
            )
        elif outcome.result != "inconclusive":  # the reversal may still land: looked up again meanwhile
            self.next_check_at = self._next_check(now, horizon, self.compensation_attempts)
        else:
            self.next_check_at = now + self._backoff(
                self.compensation_attempts, self.kind.reconcile_max_interval_s
            )

    def _compensated(self, now: datetime, detail: str) -> None:
        self.compensation_pending = False
        self.compensated = True
        self.reason = None
        self._move(State.CANCELLED, now, detail)

    def on_compensation(self, outcome: CompensationOutcome, now: datetime) -> None:
        self.compensation_attempts += 1
        self.first_compensation_at = self.first_compensation_at or now
        self._note(now, "compensation", outcome.detail)
        match outcome.result:
            case "compensated":
                self._compensated(now, outcome.detail)
            case "rejected":
                self.compensation_pending = False
                self.reason = outcome.detail
                self._touch(now)
            case "unknown" if self.services_rules and not self._compensation_resend_safe(now):
                # A reversal is a write too: never re-sent blindly. Look the operation up instead.
                self.compensation_check = True
                self.compensation_sent_at = now
                if self.kind.has_lookup:
                    self.next_check_at = now + self._backoff(0, self.kind.reconcile_max_interval_s)
                else:
                    self.next_check_at = None
                    self.needs_attention = True
                    self._note(
                        now, "needs_attention", "the reversal's answer was lost and nothing can verify it"
                    )
            case "unknown":
                self.next_compensation_at = now + self._backoff(
                    self.compensation_attempts, self.kind.reconcile_max_interval_s
                )

    # -- controls ------------------------------------------------------------------------------

    def check_register(self, kind: str, params: dict[str, Any], conversation_id: str | None = None) -> None:
        """A repeated create meets this action only from its own conversation, with its kind and its
        requested params. Another conversation learns nothing of it, not even whether kind and params
        match (`conversation_id` None: a caller of a release that did not send it)."""
        if conversation_id is not None and conversation_id != self.conversation_id:
            raise ControlRefused(
                OTHER_CONVERSATION, f"operation {self.operation_id} belongs to another conversation"
            )
        # A record kept from before params were compared as values holds the earlier form's digest.
        digests = {params_digest(params), earlier_params_digest(params)}
        if kind != self.kind.name or self.requested_digest not in digests:
            raise ControlRefused(
                "operation_conflict",
                f"operation {self.operation_id} already exists with another kind or other params",
            )

    def apply_register(self) -> bool:
        """Returns True for the registration that created the action."""
        self.registrations += 1
        return self.registrations == 1

    def check_authorize(self) -> None:
        if not self.waiting_for_authorization:
            raise ControlRefused("noop", "not waiting for authorization")

    def apply_authorize(self, by: str | None, now: datetime) -> None:
        self.authorized = True
        self.authorized_by = by
        self.reauthorization_needed = False
        self._note(now, "authorized", f"authorized by {by}" if by else "authorized")

    def check_amend(self, params: dict[str, Any], now: datetime, taken_back: bool = False) -> None:
        """`taken_back`: its queued send was taken back just now, for this amend: no send can have
        begun since, recorded or not."""
        if self.settled:
            raise ControlRefused("not_amendable", f"the action is already {self.state.value}")
        unrecorded = not taken_back and self._send_may_be_unrecorded(now)
        if self.dispatched or self.state is not State.REQUESTED or unrecorded:
            raise ControlRefused(
                "already_dispatched", "a request may already have reached the business system"
            )
        if same_params(params, self.params):
            raise ControlRefused("noop", "the params are unchanged")

    def apply_amend(self, params: dict[str, Any], now: datetime) -> None:
        self.params = params
        self.next_dispatch_at = None
        note = "params amended"
        if self.kind.requires_authorization:
            if self.authorized:
                note += "; the earlier authorization no longer applies"
            self.authorized = False
            self.authorized_by = None
            self.reauthorization_needed = True
        self._note(now, "amended", note)

    def check_cancel(self) -> None:
        if self.state is State.CANCELLED:
            raise ControlRefused("noop", "already cancelled")
        if self.state is State.FAILED:
            raise ControlRefused(
                "cannot_cancel", "it failed: nothing was applied, there is nothing to cancel"
            )
        if self.state is State.CONFIRMED and not self.kind.compensable:
            raise ControlRefused(
                "cannot_cancel", f"it was confirmed and a {self.kind.name} cannot be reversed"
            )
        if self.cancel_requested and (self.state is not State.CONFIRMED or self.compensation_pending):
            raise ControlRefused("noop", "a cancel is already under way")

    def apply_cancel(self, by: str | None, reason: str | None, now: datetime) -> None:
        self.cancel_requested = True
        words = f"cancel requested by {by}" if by else "cancel requested"
        self._note(now, "cancel_requested", f"{words}: {reason}" if reason else words)
        if self.state is State.REQUESTED and self._send_may_be_unrecorded(now):
            # Resolve the write first, as for a cancel while a request is in flight. When it was sent
            # is not recorded; by now it surely was, so the commit horizon runs from now.
            self.dispatched = True
            self.possibly_applied = True
            self.last_send_at = now
            self.lookup_requested = True
            self.first_dispatch_at = self.first_dispatch_at or now
            self._move(State.UNKNOWN, now, "cancel requested while the request may be on its way; checking")
        elif self.state is State.REQUESTED and self.may_withdraw:
            pass  # its worker may have taken it: cancelled once it is taken back (`withdrawn`)
        elif self.state is State.REQUESTED:
            self._move(State.CANCELLED, now, "cancelled before anything was applied")
        elif self.state is State.UNKNOWN or (self.state is State.RUNNING and self.accepted):
            self.resend_allowed = False
            self.lookup_requested = True
        elif self.state is State.CONFIRMED:
            self.reason = None
            self.compensation_pending = True
            self.next_compensation_at = self._compensation_from(now)

    def check_reconcile(self, now: datetime) -> None:
        if self.state not in (State.RUNNING, State.UNKNOWN):
            raise ControlRefused("noop", f"nothing to check: the action is {self.state.value}")
        if self.lookup_requested:
            return  # the lookup already due answers this caller too: accepted, so it can wait for it
        # A burst is one lookup, but only while lookups go on: once they have stopped, a lookup just
        # answered is no reason to leave the action unverified.
        if (
            self.last_lookup_at is not None
            and now - self.last_lookup_at < RECONCILE_COALESCE
            and not self.automatic_lookups_stopped(now)
        ):
            raise ControlRefused("noop", "it was just looked up")

    def apply_reconcile(self, why: str, now: datetime) -> None:
        self.lookup_requested = True
        self.lookups_from = now  # a reconcile restarts automatic lookups that had given up
        self._note(now, "reconcile", why)

    def apply_presented(
        self, channel: Channel, text: str, completed: bool, now: datetime, for_state: State | None = None
    ) -> None:
        self.presented = Presented(
            channel=channel, text=text, completed=completed, state=self.state, at=now, for_state=for_state
        )
        self._touch(now)


def send_in_flight(status: ActionStatus) -> bool:
    """Whether a status shows a send begun and not answered yet. Its answer is what verifies it: a
    lookup would wait for that answer anyway, so a reader can await it instead of asking for one."""
    last = status.history[-1] if status.history else None
    return (
        status.state is State.RUNNING
        and last is not None
        and last.state is State.RUNNING
        and last.note.startswith(SENDING)
    )
