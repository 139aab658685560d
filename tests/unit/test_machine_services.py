"""The state machine's rules for real services: accepted is not done, a reversal is a write too, the
idempotency window, and code kinds' traits. No Temporal, no HTTP."""

import pytest

from settled.domain.kinds import HandlerTraits
from settled.domain.machine import ActionRecord, ControlRefused
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.domain.states import State
from tests.unit.test_machine import CONFIRMED, LOST, at, record

PENDING = DispatchOutcome(result="pending", status_code=202, business_ref="t-1", detail="accepted")
STILL_PENDING = LookupOutcome(result="pending", status_code=200, business_ref="t-1", detail="pending")
SUCCEEDED = LookupOutcome(result="applied", status_code=200, business_ref="t-1", detail="succeeded")
ENDED = LookupOutcome(result="rejected", status_code=200, detail="the service ended it (insufficient funds)")
GONE = LookupOutcome(result="not_applied", status_code=404, detail="404")
STANDING = LookupOutcome(result="applied", status_code=200, business_ref="b-1", detail="found")
REVERSAL_LOST = CompensationOutcome(result="unknown", detail="no answer")
REVERSED = CompensationOutcome(result="compensated", status_code=200, detail="reversed")


def rules(action: ActionRecord) -> ActionRecord:
    action.services_rules = True
    return action


def test_an_accepted_request_stays_running_and_is_looked_up_until_final() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(PENDING, at(1))
    status = action.status()
    assert (status.state, status.dispatched, status.business_ref, status.claim) == (
        State.RUNNING, True, "t-1", "in_progress"
    )  # fmt: skip
    assert "accepted" in status.say and "isn't done" in status.say
    step = action.next_step(at(1))
    assert step.action == "wait" and step.until is not None
    assert action.next_step(step.until).action == "lookup"
    action.on_lookup(STILL_PENDING, step.until)
    assert action.state is State.RUNNING
    later = action.next_step(step.until)
    assert later.until is not None and later.until > step.until  # backoff
    action.on_lookup(SUCCEEDED, later.until)
    assert (action.state, action.business_ref, action.attempts) == (State.CONFIRMED, "t-1", 1)


def test_an_accepted_request_that_the_service_ends_is_failed_with_its_reason() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(PENDING, at(1))
    action.on_lookup(ENDED, at(3))
    assert action.state is State.FAILED and "insufficient funds" in (action.reason or "")


def test_a_lost_answer_found_pending_is_running_not_done() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(2))
    action.on_lookup(STILL_PENDING, at(4))
    assert action.state is State.RUNNING and action.accepted and action.business_ref == "t-1"


def test_an_accepted_request_never_needs_attention_while_the_service_finishes_it() -> None:
    action = record("refund", authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(PENDING, at(1))
    action.tick(at(100_000))
    assert not action.needs_attention


def test_a_cancel_of_an_accepted_request_looks_it_up_first() -> None:
    action = record(authorized=True)
    action.begin_dispatch(at(0))
    action.on_dispatch(PENDING, at(1))
    action.apply_cancel("caller", None, at(2))
    assert action.next_step(at(2)).action == "lookup"
    action.on_lookup(STANDING, at(3))
    assert action.state is State.CONFIRMED and action.compensation_pending
    assert action.next_step(at(3)).action == "compensate"


def test_past_the_idempotency_window_a_resend_is_no_longer_safe() -> None:
    action = record("refund", authorized=True, idempotency_window_s=3600.0)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(2))
    assert action.resend_safe(at(60))
    assert not action.resend_safe(at(3599))  # the re-send could reach it after the key is forgotten
    inconclusive = LookupOutcome(result="inconclusive", status_code=503, detail="503")
    action.on_lookup(inconclusive, at(4000))
    assert not action.resend_allowed and action.next_step(at(4000)).action == "wait"


def test_an_idempotent_dispatch_may_be_resent_like_a_keyed_one() -> None:
    action = record("refund", authorized=True, idempotency_header=None, idempotent=True, lookup=None)
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    assert action.next_step(at(100)).action == "dispatch"


def test_a_code_kind_is_resent_only_when_its_handler_deduplicates() -> None:
    for dedup, expected in ((True, "dispatch"), (False, "wait")):
        traits = HandlerTraits(deduplicates=dedup)
        action = record(
            "refund", authorized=True, handler="app:refund", handler_traits=traits,
            dispatch=None, lookup=None, idempotency_header=None, operation_field=None,
        )  # fmt: skip
        action.begin_dispatch(at(0))
        action.on_dispatch(LOST, at(1))
        assert action.next_step(at(100)).action == expected


# -- a reversal is a write too ------------------------------------------------------------------


def unkeyed_booking() -> ActionRecord:
    """A booking whose reversal is a POST without an idempotency key: it may not be re-sent blindly."""
    return rules(record(authorized=True, idempotency_header=None))


def confirmed_then_cancelled(action: ActionRecord) -> ActionRecord:
    action.begin_dispatch(at(0))
    action.on_dispatch(CONFIRMED, at(1))
    action.apply_cancel("caller", None, at(2))
    assert action.next_step(at(2)).action == "compensate"
    return action


def test_a_lost_reversal_is_looked_up_not_resent() -> None:
    action = confirmed_then_cancelled(unkeyed_booking())
    action.on_compensation(REVERSAL_LOST, at(3))
    assert action.state is State.CONFIRMED and action.compensation_pending
    step = action.next_step(at(3))
    assert step.action == "wait" and step.until is not None
    assert action.next_step(step.until).action == "lookup"


def test_a_lost_reversal_found_gone_or_reversed_is_cancelled_and_compensated() -> None:
    for answer in (GONE, STANDING.model_copy(update={"reversed": True})):
        action = confirmed_then_cancelled(unkeyed_booking())
        action.on_compensation(REVERSAL_LOST, at(3))
        action.on_lookup(answer, at(4))  # inside the horizon: a reversal seen is a reversal done
        status = action.status()
        assert (status.state, status.compensated, status.business_ref) == (State.CANCELLED, True, "b-1")


def test_a_lost_reversal_still_standing_is_resent_only_past_its_horizon() -> None:
    action = confirmed_then_cancelled(unkeyed_booking())
    horizon = action.kind.commit_horizon_s
    action.on_compensation(REVERSAL_LOST, at(3))
    action.on_lookup(STANDING, at(4))  # it may still be committing the reversal
    now = at(4)
    while now < at(3 + horizon):  # looked up again at its backoff meanwhile, never re-sent
        step = action.next_step(now)
        assert step.action == "wait" and step.until is not None and now < step.until <= at(3 + horizon)
        now = step.until
        assert action.next_step(now).action == "lookup"
        if now < at(3 + horizon):
            action.on_lookup(STANDING, now)
    assert now == at(3 + horizon)
    action.on_lookup(STANDING, at(3 + horizon))
    assert action.next_step(at(3 + horizon)).action == "compensate"
    action.on_compensation(REVERSED, at(4 + horizon))
    assert action.state is State.CANCELLED and action.compensated


def test_a_reversal_that_cannot_apply_twice_is_resent_as_before() -> None:
    keyed = rules(record(authorized=True))  # the sandbox booking: its reversal carries its own key
    deleted = rules(record(authorized=True, idempotency_header=None))
    assert deleted.kind.compensate is not None
    deleted.kind = deleted.kind.model_copy(
        update={"compensate": deleted.kind.compensate.model_copy(update={"method": "DELETE"})}
    )
    for action in (keyed, deleted):
        confirmed_then_cancelled(action)
        action.on_compensation(REVERSAL_LOST, at(3))
        step = action.next_step(at(3))
        assert step.until is not None and action.next_step(step.until).action == "compensate"


def test_runs_before_the_rules_replay_the_old_resend() -> None:
    action = confirmed_then_cancelled(record(authorized=True, idempotency_header=None))
    action.on_compensation(REVERSAL_LOST, at(3))
    step = action.next_step(at(3))
    assert step.until is not None and action.next_step(step.until).action == "compensate"


def test_a_reversal_waits_until_a_lost_dispatch_is_past_its_horizon() -> None:
    action = unkeyed_booking()
    horizon = action.kind.commit_horizon_s
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))  # may still land until 1 + horizon
    action.apply_cancel("caller", None, at(2))
    action.on_lookup(STANDING, at(3))  # found applied: to be reversed, but not before the horizon
    assert action.state is State.CONFIRMED and action.compensation_pending
    step = action.next_step(at(3))
    assert step.action == "wait" and step.until == at(1 + horizon)
    assert action.next_step(at(1 + horizon)).action == "compensate"


def test_a_reversal_of_a_write_answered_by_the_service_needs_no_wait() -> None:
    action = confirmed_then_cancelled(unkeyed_booking())
    assert action.next_compensation_at == at(2)


# -- a send queued behind its kind's cap ---------------------------------------------------------


def queued(kind: str = "refund", **changes: object) -> ActionRecord:
    action = rules(record(kind, authorized=True, **changes))
    action.begin_dispatch(at(0))
    action.queue(at(0))  # refused on the shared worker before anything left
    return action


def test_a_send_refused_for_lack_of_room_waits_requested_and_queued() -> None:
    action = queued()
    status = action.status()
    assert (status.state, status.dispatched, status.attempts, status.claim) == (
        State.REQUESTED, False, 0, "in_progress"
    )  # fmt: skip
    assert "queued behind others to the same service" in status.say
    assert [entry.state for entry in status.history] == [State.REQUESTED]
    action.check_sending()
    action.apply_sending(at(5))
    assert action.state is State.RUNNING and action.dispatched and not action.queued
    action.on_dispatch(CONFIRMED, at(6))
    assert action.state is State.CONFIRMED and action.attempts == 1


def test_a_queued_send_cancelled_is_never_sent() -> None:
    action = queued()
    action.check_cancel()
    action.apply_cancel("caller", None, at(1))
    assert action.state is State.CANCELLED and not action.dispatched
    with pytest.raises(ControlRefused):
        action.check_sending()
    action.on_dispatch(DispatchOutcome(result="not_sent", detail="cancelled while it waited"), at(2))
    assert action.state is State.CANCELLED and action.attempts == 0  # the late answer changes nothing


def test_a_queued_send_may_be_amended_and_then_waits_for_the_new_go_ahead() -> None:
    action = queued("room_booking")
    action.check_amend({"room": "Bob", "day": "Fri"}, at(1))
    action.apply_amend({"room": "Bob", "day": "Fri"}, at(1))
    with pytest.raises(ControlRefused, match="authorization was withdrawn"):
        action.check_sending()
    action.on_dispatch(DispatchOutcome(result="not_sent", detail="its authorization was withdrawn"), at(2))
    assert action.state is State.REQUESTED and action.next_step(at(3)).action == "wait"
    action.apply_authorize("caller", at(4))
    assert action.params == {"room": "Bob", "day": "Fri"}


def test_a_queued_resend_of_an_unknown_write_stays_unknown() -> None:
    action = rules(record("refund", authorized=True))
    action.begin_dispatch(at(0))
    action.on_dispatch(LOST, at(1))
    action.begin_dispatch(at(3))  # re-sent with the same key...
    action.queue(at(3))  # ...but refused for lack of room: the first may still stand
    assert action.state is State.UNKNOWN and action.dispatched and action.attempts == 1


# -- since QUEUE_REVISION: Temporal's record that the kind's worker took the send marks it sending -----

WITHDRAWN = DispatchOutcome(result="withdrawn", detail="taken back from its kind's queue: not sent")


def waiting_turn(kind: str = "refund") -> ActionRecord:
    action = queued(kind)
    action.start_marks_sending = True
    return action


def test_a_queued_send_reads_requested_until_taken_and_running_from_when_it_was_taken() -> None:
    action = waiting_turn()
    status = action.status()
    taken = action.once_taken()
    assert status.state is State.REQUESTED and taken is not None and action.may_withdraw
    shown = taken.applied(status, at(5))
    assert (shown.state, shown.dispatched, shown.attempts, shown.claim) == (
        State.RUNNING, True, 0, "in_progress"
    )  # fmt: skip
    assert "queued" not in shown.say and shown.updated_at == at(5)
    assert [(entry.state, entry.at) for entry in shown.history] == [
        (State.REQUESTED, at(0)), (State.RUNNING, at(5))
    ]  # fmt: skip
    # Its answer is recorded with the moment it was taken, as the reads showed it.
    action.apply_sending(at(5))
    action.on_dispatch(CONFIRMED, at(6))
    assert action.once_taken() is None and not action.may_withdraw
    assert [(entry.state, entry.at) for entry in action.status().history] == [
        (State.REQUESTED, at(0)), (State.RUNNING, at(5)), (State.CONFIRMED, at(6))
    ]  # fmt: skip


def test_a_queued_send_cancelled_is_cancelled_once_taken_back_never_sent() -> None:
    action = waiting_turn()
    action.check_cancel()
    action.apply_cancel("caller", None, at(1))
    # Its worker may have taken it meanwhile: not cancelled until it is taken back.
    assert action.state is State.REQUESTED and action.cancel_requested and action.may_withdraw
    with pytest.raises(ControlRefused, match="already under way"):
        action.check_cancel()
    action.on_dispatch(WITHDRAWN, at(2))
    assert action.state is State.CANCELLED and not action.dispatched and action.attempts == 0


def test_a_cancel_too_late_to_take_the_send_back_resolves_the_write_first() -> None:
    action = waiting_turn()
    action.apply_cancel("caller", None, at(1))
    action.apply_sending(at(1))  # its worker had taken it: Temporal refused to take it back
    action.on_dispatch(CONFIRMED, at(2))
    assert action.state is State.CONFIRMED and action.attempts == 1 and action.cancel_requested
    assert action.compensation_pending == action.kind.compensable


def test_a_queued_send_amended_is_taken_back_first_and_then_amended() -> None:
    action = waiting_turn("room_booking")
    amended = {"room": "Bob", "day": "Fri"}
    action.check_amend(amended, at(1))  # accepted while it waits; applied once taken back
    action.on_dispatch(WITHDRAWN, at(2))
    assert action.state is State.REQUESTED and not action.queued and not action.dispatched
    action.check_amend(amended, at(2), taken_back=True)
    action.apply_amend(amended, at(2))
    assert action.params == amended and action.waiting_for_authorization
