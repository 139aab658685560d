"""The state machine on its own: the rules of the states (docs/reference.md), without Temporal or HTTP."""

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from settled.domain.canonical import earlier_params_digest
from settled.domain.handoff import fully_presented
from settled.domain.kinds import load_kinds
from settled.domain.machine import (
    OTHER_CONVERSATION,
    ActionRecord,
    ControlRefused,
    NewAction,
    Step,
    send_in_flight,
)
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.domain.states import State

KINDS = load_kinds(None)
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CONFIRMED = DispatchOutcome(result="confirmed", status_code=201, business_ref="b-1", detail="ok")
LOST = DispatchOutcome(result="unknown", detail="timeout")
NOT_SENT = DispatchOutcome(result="not_sent", detail="refused")
REJECTED = DispatchOutcome(result="rejected", status_code=422, detail="refused: bad room")
FLOAT_REFUND = {"order_id": "o", "amount": 2.0, "currency": "EUR"}


def record(kind: str = "room_booking", authorized: bool = False, **changes: object) -> ActionRecord:
    spec = KINDS.get(kind)
    assert spec is not None
    spec = spec.model_copy(update=changes)
    params = (
        {"room": "Ada", "day": "Thu"}
        if kind == "room_booking"
        else {"order_id": "o", "amount": 1, "currency": "EUR"}
    )
    new = NewAction(
        operation_id="op",
        operation_key="op",
        conversation_id="c",
        kind=spec,
        params=params,
        authorized=authorized,
    )
    return ActionRecord.create(new, T0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_nothing_is_dispatched_before_authorization() -> None:
    action = record()
    assert action.next_step(at(0)).action == "wait"
    assert action.status().claim == "in_progress"
    action.apply_authorize("caller", at(1))
    assert action.next_step(at(1)).action == "dispatch"


def test_only_the_business_system_confirms() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    assert action.status().claim == "in_progress"
    action.on_dispatch(CONFIRMED, at(1))
    status = action.status()
    assert (status.state, status.claim, status.business_ref) == (State.CONFIRMED, "done", "b-1")
    assert "b-1" in status.say


def test_unknown_is_never_failed_by_time() -> None:
    action = record("refund", authorized=True, idempotency_header=None, lookup=None)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    for seconds in (10, 1000, 10**6):
        action.tick(at(seconds))
        step = action.next_step(at(seconds))
        assert action.state is State.UNKNOWN and step.action == "wait"
    assert action.needs_attention is True
    assert "haven't confirmed" in action.status().say


def test_without_dedup_an_inconclusive_lookup_never_allows_a_resend() -> None:
    action = record("refund", authorized=True, idempotency_header=None)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    step = action.next_step(at(100))
    assert step.action == "lookup"
    action.on_lookup(LookupOutcome(result="inconclusive", status_code=503, detail="503"), at(100))
    assert action.next_step(at(100)).action == "wait"
    action.on_lookup(LookupOutcome(result="not_applied", status_code=404, detail="404"), at(200))
    assert action.next_step(at(200)).action == "dispatch"  # only an authority allows the re-send


def test_with_dedup_an_inconclusive_lookup_allows_a_resend_with_the_same_key() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.on_lookup(LookupOutcome(result="inconclusive", detail="503"), at(2))
    assert action.next_step(at(2)).action == "dispatch"


def test_a_connection_never_made_stays_requested_and_is_not_an_attempt() -> None:
    action = record(authorized=True)
    for n in range(5):
        action.begin_dispatch(at(n))
        action.on_dispatch(NOT_SENT, at(n))
    assert action.state is State.REQUESTED and action.attempts == 0
    assert [entry.state for entry in action.history] == [State.REQUESTED, State.RUNNING, State.REQUESTED]
    assert action.next_step(at(4)).action == "wait"


def test_cancel_before_dispatch_is_cancelled_and_nothing_more_happens() -> None:
    action = record()
    action.check_cancel()
    action.apply_cancel("caller", None, at(1))
    assert action.state is State.CANCELLED and not action.dispatched
    with pytest.raises(ControlRefused) as refused:
        action.check_cancel()
    assert refused.value.code == "noop"


def test_cancel_in_flight_then_applied_compensates_when_the_kind_can() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.apply_cancel(None, None, at(0.5))
    assert "check before I can cancel" in action.status().say
    action.on_dispatch(CONFIRMED, at(1))
    assert action.state is State.CONFIRMED and action.next_step(at(1)).action == "compensate"
    assert "reversing" in action.status().say and action.status().compensating
    action.on_compensation(CompensationOutcome(result="compensated", status_code=200, detail="ok"), at(2))
    assert (action.state, action.compensated, action.business_ref) == (State.CANCELLED, True, "b-1")


def test_cancel_in_flight_then_applied_stays_confirmed_when_it_cannot_be_reversed() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.apply_cancel(None, None, at(0.5))
    action.on_dispatch(CONFIRMED, at(1))
    assert action.state is State.CONFIRMED and action.next_step(at(1)).action == "wait"
    assert "too late" in action.status().say
    with pytest.raises(ControlRefused) as refused:
        action.check_cancel()
    assert refused.value.code == "cannot_cancel"


def test_cancel_in_flight_answered_with_a_rejection_ends_failed() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.apply_cancel(None, None, at(0.5))
    action.on_dispatch(REJECTED, at(1))
    assert action.state is State.FAILED and action.status().claim == "not_done"


def test_cancel_while_unknown_looks_up_first() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.apply_cancel(None, None, at(40))
    assert action.next_step(at(40)).action == "lookup"
    action.on_lookup(LookupOutcome(result="not_applied", detail="404"), at(41))  # past the horizon
    assert action.state is State.CANCELLED and not action.compensated


def test_rejected_compensation_leaves_it_confirmed_with_a_reason() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    action.apply_cancel(None, None, at(2))
    action.on_compensation(
        CompensationOutcome(result="rejected", status_code=422, detail="too late to cancel"), at(3)
    )
    status = action.status()
    assert (status.state, status.cancel_requested, status.reason) == (
        State.CONFIRMED,
        True,
        "too late to cancel",
    )


def test_amend_resets_authorization_and_is_refused_once_dispatched_or_settled() -> None:
    action = record(authorized=True)
    action.check_amend({"room": "Ada", "day": "Fri"}, at(0))
    action.apply_amend({"room": "Ada", "day": "Fri"}, at(0))
    assert not action.authorized and action.next_step(at(0)).action == "wait"
    assert "details changed" in action.status().say
    action.apply_authorize(None, at(1))
    action.begin_dispatch(at(1))
    with pytest.raises(ControlRefused) as refused:
        action.check_amend({"room": "Ada", "day": "Sat"}, at(2))
    assert refused.value.code == "already_dispatched"
    action.on_dispatch(CONFIRMED, at(2))
    with pytest.raises(ControlRefused) as refused:
        action.check_amend({"room": "Ada", "day": "Sat"}, at(2))
    assert refused.value.code == "not_amendable"


def test_authorize_when_not_waiting_is_a_noop() -> None:
    action = record(authorized=True)
    with pytest.raises(ControlRefused) as refused:
        action.check_authorize()
    assert refused.value.code == "noop"


def test_a_burst_of_reconciles_is_one_lookup() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.check_reconcile(at(1))
    action.apply_reconcile("interrupted", at(1))
    action.check_reconcile(at(1.1))  # accepted, so its caller can wait for the lookup already due
    action.apply_reconcile("what may I say?", at(1.1))
    assert action.next_step(at(1.1)).action == "lookup"
    action.on_lookup(LookupOutcome(result="inconclusive", detail="503"), at(1.2))
    assert action.next_step(at(1.2)).action != "lookup"  # one lookup answered both
    with pytest.raises(ControlRefused):
        action.check_reconcile(at(1.5))  # just looked up
    action.check_reconcile(at(3))


def test_a_reconcile_just_after_the_last_automatic_lookup_restarts_lookups() -> None:
    action = record("refund", authorized=True, idempotency_header=None, give_up_after_s=100.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.on_lookup(LookupOutcome(result="inconclusive", detail="503"), at(99.8))
    action.tick(at(100.2))
    assert action.automatic_lookups_stopped(at(100.2))
    action.check_reconcile(at(100.2))  # 0.4 s after a lookup, but nothing would look again
    action.apply_reconcile("operator", at(100.2))
    assert action.next_step(at(100.2)).action == "lookup"
    assert not action.automatic_lookups_stopped(at(100.2))


def test_lookups_give_up_after_the_window_and_reconcile_restarts_them() -> None:
    action = record("refund", authorized=True, idempotency_header=None, give_up_after_s=100.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.tick(at(400))
    assert action.needs_attention
    assert action.next_step(at(400)).until is None  # automatic lookups are over: only a control wakes it
    action.apply_reconcile("operator", at(400))
    assert action.next_step(at(400)).action == "lookup"


def test_registration_conflicts_on_other_params() -> None:
    action = record()
    action.check_register("room_booking", {"room": "Ada", "day": "Thu"})
    assert action.apply_register() is True and action.apply_register() is False
    with pytest.raises(ControlRefused) as refused:
        action.check_register("room_booking", {"room": "Ada", "day": "Fri"})
    assert refused.value.code == "operation_conflict"


def test_a_repeat_from_another_conversation_learns_nothing_of_the_action() -> None:
    """Refused before kind and params are compared, in words that name neither the other conversation
    nor anything the action holds."""
    action = record()  # conversation "c", a booking of Ada on Thu
    action.check_register("room_booking", {"room": "Ada", "day": "Thu"}, "c")
    for kind, params in (("room_booking", {"room": "Ada", "day": "Thu"}), ("refund", {})):
        with pytest.raises(ControlRefused) as refused:
            action.check_register(kind, params, "c-other")
        assert refused.value.code == OTHER_CONVERSATION
        assert not {"Ada", "Thu", "room_booking", '"c"'} & set(refused.value.message.split())
    assert action.registrations == 0


def test_a_repeat_compares_params_as_json_values() -> None:
    action = record("refund")  # requested with {"order_id": "o", "amount": 1, "currency": "EUR"}
    for same in (
        {"currency": "EUR", "amount": 1.0, "order_id": "o"},
        {"order_id": "o", "amount": 1e0, "currency": "EUR"},
    ):
        action.check_register("refund", same)
    for other in (
        {"order_id": "o", "amount": 1.5, "currency": "EUR"},
        {"order_id": "o", "amount": "1", "currency": "EUR"},
    ):
        with pytest.raises(ControlRefused) as refused:
            action.check_register("refund", other)
        assert refused.value.code == "operation_conflict"


def test_a_record_kept_from_before_values_were_compared_still_meets_its_repeats() -> None:
    """A run continued as new carries the digest its first run recorded, in the earlier form."""
    action = record("refund").model_copy(update={"requested_digest": earlier_params_digest(FLOAT_REFUND)})
    action.check_register("refund", dict(reversed(FLOAT_REFUND.items())))
    with pytest.raises(ControlRefused):
        action.check_register("refund", {**FLOAT_REFUND, "amount": 2.5})


def test_an_amend_to_the_same_values_written_otherwise_changes_nothing() -> None:
    action = record("refund", requires_authorization=True, authorized=True)
    with pytest.raises(ControlRefused) as refused:
        action.check_amend({"amount": 1.0, "currency": "EUR", "order_id": "o"}, at(0))
    assert refused.value.code == "noop" and action.authorized  # the go-ahead still stands
    action.check_amend({"order_id": "o", "amount": 1.01, "currency": "EUR"}, at(0))


def test_redaction_after_the_retention_window_keeps_the_sentence_true() -> None:
    action = record(authorized=True, redact_params_after_s=60.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    action.tick(at(62))
    status = action.status()
    assert set(status.params.values()) == {"[redacted]"}
    assert "b-1" in status.say and "[redacted]" not in status.say
    action.check_register("room_booking", {"room": "Ada", "day": "Thu"})  # repeats still match


def test_redaction_takes_the_presented_text_and_keeps_what_it_was_about() -> None:
    """The presented sentence quotes the params; once it is redacted, the handoff must still know
    that the confirmation was fully presented (and not say it again in its redacted words)."""
    action = record(authorized=True, redact_params_after_s=60.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    action.apply_presented("voice", action.status().say, True, at(2))
    action.tick(at(62))
    presented = action.status().presented
    assert presented is not None and presented.text == "[redacted]"
    assert presented.for_state is State.CONFIRMED and fully_presented(action.status())


# -- business calls inside the workflow task (local activities) -----------------------------------


def in_task_record(**changes: object) -> ActionRecord:
    action = record(authorized=True, **changes)
    action.calls_in_task = True
    return action


def test_a_write_runs_in_the_task_only_for_a_deduplicating_service_and_a_caller_who_waits() -> None:
    action = in_task_record()  # room_booking: Idempotency-Key, authoritative lookup, timeout 2 s
    assert not action.in_task("dispatch", at(0))  # nobody waits for the answer
    action.await_answer(at(1))
    assert not action.in_task("dispatch", at(0))  # the wait ends before the call may end
    action.await_answer(at(2))
    assert action.in_task("dispatch", at(0)) and action.in_task("lookup", at(0))
    assert not action.in_task("dispatch", at(0.5))
    no_dedup = in_task_record(idempotency_header=None)
    no_dedup.await_answer(at(10))
    assert not no_dedup.in_task("dispatch", at(0)) and no_dedup.in_task("lookup", at(0))
    recorded_before = record(authorized=True)  # a run from before calls in the task existed
    recorded_before.await_answer(at(10))
    assert not recorded_before.in_task("dispatch", at(0))


def test_a_cancel_that_may_follow_an_unrecorded_send_checks_before_cancelling() -> None:
    """A retried workflow task replays the record as `requested`, though the task that died may have
    sent the request: the cancel is resolved by a lookup, never answered "nothing was applied"."""
    action = in_task_record()
    action.check_cancel()
    action.apply_cancel("caller", None, at(1))
    status = action.status()
    assert (status.state, status.dispatched, status.claim) == (State.UNKNOWN, True, "unknown")
    assert action.next_step(at(1)).action == "lookup"
    action.on_lookup(LookupOutcome(result="applied", business_ref="b-7", detail="found"), at(2))
    assert action.compensation_pending  # applied after all: it is reversed, not called never-applied
    other = in_task_record(commit_horizon_s=30.0)
    other.apply_cancel(None, None, at(1))
    other.on_lookup(LookupOutcome(result="not_applied", detail="404"), at(2))
    assert other.state is State.UNKNOWN  # the send may have left just now: a 404 proves nothing yet
    assert other.next_step(at(2)) == Step(action="wait", until=at(4))  # looked up again at its backoff
    assert other.next_step(at(31)).action == "lookup"
    other.on_lookup(LookupOutcome(result="not_applied", detail="404"), at(31))
    assert other.state is State.CANCELLED and not other.compensated


def test_an_amend_that_may_follow_an_unrecorded_send_is_refused() -> None:
    action = in_task_record()
    with pytest.raises(ControlRefused) as refused:
        action.check_amend({"room": "Ada", "day": "Fri"}, at(0))
    assert refused.value.code == "already_dispatched"
    action.on_dispatch(NOT_SENT, at(1))  # a connection never made: it waits out its backoff, not sent
    action.check_amend({"room": "Ada", "day": "Fri"}, at(1))
    action.apply_cancel(None, None, at(1))
    assert action.state is State.CANCELLED


# -- the commit horizon: an early 404 is not proof ---------------------------------------------------

NOT_FOUND = LookupOutcome(result="not_applied", status_code=404, detail="404 not found")


def test_an_early_404_never_allows_a_resend_without_dedup() -> None:
    """The request may still be committing (slow processing, a queue, a lagging replica): a 404 made
    inside the horizon is inconclusive, and the next look comes once the horizon has passed."""
    action = record("refund", authorized=True, idempotency_header=None, commit_horizon_s=30.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))  # the client gave up at 1 s; the service may commit later
    action.apply_reconcile("caller asked", at(1.4))
    assert action.next_step(at(1.4)).action == "lookup"
    action.on_lookup(NOT_FOUND, at(1.5), asked_at=at(1.4))
    status = action.status()
    assert (status.state, status.claim, status.attempts) == (State.UNKNOWN, "unknown", 1)
    assert "checking" in status.say
    assert action.next_step(at(2)) == Step(action="wait", until=at(3.5))  # its backoff, not the horizon
    looked_at = early_404s(action, at(3.5), until=at(31))
    assert looked_at == [at(3.5), at(7.5), at(15.5), at(31)]  # 2, 4, 8 s apart; the last at the horizon
    action.on_lookup(NOT_FOUND, at(31.1), asked_at=at(31))
    assert action.next_step(at(31.1)).action == "dispatch"  # now the authority has spoken


def early_404s(
    action: ActionRecord, first: datetime, until: datetime, horizon: datetime | None = None
) -> list[datetime]:
    """Answer each lookup the action makes before `until` with a 404, checking that none of them
    concludes anything (no re-send, no end) and that the next one comes by the `horizon` (default
    `until`); when each lookup was made, and the first one after `until`."""
    looked_at: list[datetime] = []
    now = first
    while now < until:
        assert action.next_step(now).action == "lookup"
        looked_at.append(now)
        action.on_lookup(NOT_FOUND, now)
        assert action.state is State.UNKNOWN and action.attempts == 1 and not action.resend_allowed
        step = action.next_step(now)
        assert step.action == "wait" and step.until is not None and step.until <= (horizon or until)
        now = step.until
    looked_at.append(now)
    return looked_at


def test_a_write_found_inside_the_horizon_confirms_at_once() -> None:
    """The lookups keep their cadence inside the horizon: a write that lands 10 s after a lost answer
    is confirmed at the first lookup after that, not when the 30 s horizon has passed."""
    action = record("refund", authorized=True, idempotency_header=None, commit_horizon_s=30.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    assert early_404s(action, at(2), until=at(10), horizon=at(31)) == [at(2), at(4), at(8), at(16)]
    action.on_lookup(LookupOutcome(result="applied", business_ref="b-3", detail="found"), at(16))
    assert (action.state, action.business_ref, action.attempts) == (State.CONFIRMED, "b-3", 1)


def test_inside_the_horizon_the_lookups_are_at_most_the_max_interval_apart() -> None:
    action = record(
        "refund",
        authorized=True,
        idempotency_header=None,
        commit_horizon_s=30.0,
        reconcile_max_interval_s=5.0,
    )
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    looked_at = early_404s(action, at(2), until=at(31))
    assert looked_at[:4] == [at(2), at(4), at(8), at(13)] and looked_at[-1] == at(31)
    assert all(later - earlier <= timedelta(seconds=5) for earlier, later in pairwise(looked_at))
    action.on_lookup(NOT_FOUND, at(31))  # past the horizon: conclusive, so it may be sent again
    assert action.next_step(at(31)).action == "dispatch"


def test_a_lookup_asked_inside_the_horizon_is_inconclusive_even_if_answered_after_it() -> None:
    action = record("refund", authorized=True, idempotency_header=None, commit_horizon_s=10.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.on_lookup(NOT_FOUND, at(12), asked_at=at(10.9))
    assert action.state is State.UNKNOWN and action.next_step(at(12)).action == "lookup"  # at once


@pytest.mark.parametrize("kind", ["room_booking", "refund"])
def test_an_early_404_never_turns_a_cancel_into_never_applied(kind: str) -> None:
    action = record(kind, authorized=True, commit_horizon_s=30.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.apply_cancel("caller", None, at(1.4))
    action.on_lookup(NOT_FOUND, at(1.5), asked_at=at(1.4))
    status = action.status()
    assert (status.state, status.cancel_requested, status.claim) == (State.UNKNOWN, True, "unknown")
    assert "checking before I can cancel" in status.say
    assert action.next_step(at(2)) == Step(action="wait", until=at(3.5))
    early_404s(action, at(3.5), until=at(31))  # never "cancelled" while the write may still land
    # The write landed meanwhile: the look after the horizon finds it, and it is reversed, not denied.
    action.on_lookup(LookupOutcome(result="applied", business_ref="b-9", detail="found"), at(31))
    assert action.state is State.CONFIRMED and action.business_ref == "b-9"


def test_with_dedup_an_early_404_resends_with_the_same_key() -> None:
    """The service deduplicates: a re-send with the key is safe whatever the lookup says."""
    action = record(authorized=True, commit_horizon_s=30.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.on_lookup(NOT_FOUND, at(2))
    assert action.state is State.UNKNOWN and action.next_step(at(2)).action == "dispatch"


def test_the_horizon_runs_from_the_last_send_and_a_zero_horizon_trusts_at_once() -> None:
    action = record("refund", authorized=True, idempotency_header=None, commit_horizon_s=5.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.on_lookup(NOT_FOUND, at(7))
    action.begin_dispatch(at(7))
    action.on_dispatch(LOST, at(8))  # the re-send moves the horizon
    action.on_lookup(NOT_FOUND, at(9))
    assert action.next_step(at(9)) == Step(action="wait", until=at(13))
    instant = record("refund", authorized=True, idempotency_header=None, commit_horizon_s=0.0)
    instant.begin_dispatch(at(0))
    instant.on_dispatch(LOST, at(1))
    instant.on_lookup(NOT_FOUND, at(1))
    assert instant.next_step(at(1)).action == "dispatch"


def test_a_connection_never_made_does_not_start_a_horizon() -> None:
    action = record("refund", authorized=True, idempotency_header=None)
    action.begin_dispatch(at(0))
    action.on_dispatch(NOT_SENT, at(1))
    assert action.commit_horizon() is None


def test_a_horizon_longer_than_the_lookups_last_is_refused() -> None:
    spec = KINDS.get("refund")
    assert spec is not None
    with pytest.raises(ValueError, match="commit_horizon_s must be shorter than give_up_after_s"):
        type(spec).model_validate({**spec.model_dump(), "commit_horizon_s": 100, "give_up_after_s": 50})


def test_a_connection_never_made_leaves_it_undispatched_and_amendable() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(NOT_SENT, at(1))
    status = action.status()
    assert (status.state, status.dispatched, status.attempts) == (State.REQUESTED, False, 0)
    action.check_amend({"order_id": "o", "amount": 2, "currency": "EUR"}, at(1))  # not refused


def _settled(closes_when_settled: bool, **changes: object) -> ActionRecord:
    action = record(authorized=True, **changes)
    action.closes_when_settled = closes_when_settled
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    return action


def test_a_settled_run_closes_after_its_linger_and_earlier_runs_after_the_window() -> None:
    week = 7 * 86400
    lingering = _settled(True)
    assert lingering.next_step(at(30)) == Step(action="wait", until=at(61))
    lingering.apply_presented("voice", "Booked.", True, at(30))  # a control does not move the deadline
    assert lingering.next_step(at(31)) == Step(action="wait", until=at(61))
    assert lingering.next_step(at(61)).action == "close"
    assert lingering.late_controls_until() == at(1 + week)
    staying = _settled(False)  # a run of an earlier revision stays open for the whole window
    assert staying.next_step(at(61)) == Step(action="wait", until=at(1 + week))


def test_a_run_opened_again_lingers_from_its_opening_and_never_past_the_window() -> None:
    action = _settled(True)
    action.open_again(at(86400))
    assert action.next_step(at(86400)) == Step(action="wait", until=at(86460))
    action.open_again(at(7 * 86400 - 9))  # nine seconds before the window ends
    assert action.next_step(at(7 * 86400 - 9)) == Step(action="wait", until=at(7 * 86400 + 1))


def _settled_unheard(closes_when_settled: bool = True, **changes: object) -> ActionRecord:
    """Settled at 1 s, created by a caller that never reports what was heard."""
    action = record(authorized=True, **changes)
    new = NewAction.model_validate({**_new_of(action), "reports_heard": False})
    action = ActionRecord.create(new, T0)
    action.closes_when_settled = closes_when_settled
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    return action


def _new_of(action: ActionRecord) -> dict[str, object]:
    return {
        "operation_id": action.operation_id,
        "operation_key": action.operation_key,
        "conversation_id": action.conversation_id,
        "kind": action.kind,
        "params": action.params,
        "authorized": True,
    }


def test_a_caller_that_never_reports_what_was_heard_gets_no_linger() -> None:
    action = _settled_unheard()
    assert not action.reports_heard
    assert action.next_step(at(1)).action == "close"  # in the task it settled in
    # A late control opens it again as today, and that run lingers as any other.
    action.open_again(at(86400))
    assert action.next_step(at(86400)) == Step(action="wait", until=at(86460))
    # A run of an earlier revision keeps the whole window whatever the caller said.
    assert _settled_unheard(closes_when_settled=False).next_step(at(61)) == Step(
        action="wait", until=at(1 + 7 * 86400)
    )


def test_without_a_linger_a_compensation_or_a_pending_redaction_still_keeps_the_run_open() -> None:
    action = _settled_unheard()
    action.apply_cancel("caller", None, at(1))
    assert action.next_step(at(1)).action == "compensate"
    redacting = _settled_unheard(redact_params_after_s=3600.0)
    assert redacting.next_step(at(1)) == Step(action="wait", until=at(3601))


def test_a_record_without_the_callers_word_reports_what_was_heard() -> None:
    """Every record and action input written before the field existed decodes as a caller that
    reports what was heard: its linger is unchanged."""
    action = _settled(True)
    dumped = action.model_dump(mode="json")
    del dumped["reports_heard"]
    assert ActionRecord.model_validate(dumped).reports_heard
    assert NewAction.model_validate(_new_of(action)).reports_heard
    assert action.next_step(at(1)) == Step(action="wait", until=at(61))


def test_a_compensation_or_a_pending_redaction_keeps_a_settled_run_open() -> None:
    action = _settled(True)
    action.apply_cancel("caller", None, at(100))
    assert action.next_step(at(100)).action == "compensate"
    redacting = _settled(True, redact_params_after_s=3600.0)
    assert redacting.next_step(at(61)) == Step(action="wait", until=at(3601))
    redacting.tick(at(3601))
    assert redacting.params_redacted and redacting.next_step(at(3601)).action == "close"


@pytest.mark.parametrize(
    "answer",
    [
        CONFIRMED,
        LOST,
        NOT_SENT,
        REJECTED,
        DispatchOutcome(result="pending", status_code=202, business_ref="t-1", detail="accepted"),
    ],
)
def test_a_send_is_in_flight_from_its_begin_to_its_answer(answer: DispatchOutcome) -> None:
    """What a reader may await instead of asking for a lookup: only a send begun and not answered,
    the first or a later one (an accepted request, `running` too, is looked up until final)."""
    action = record(authorized=True)
    assert not send_in_flight(action.status())
    action.begin_dispatch(at(0))
    assert send_in_flight(action.status())
    action.on_dispatch(answer, at(1))
    assert not send_in_flight(action.status())
    if action.state is State.UNKNOWN:
        action.begin_dispatch(at(2))  # sent again with the same key
        assert send_in_flight(action.status())
