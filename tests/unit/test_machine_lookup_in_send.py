"""A send whose answer is lost, looked up in the same business call (runs since LEAN_REVISION): the state
machine records the lost answer and then the lookup's, by the usual rules of a lookup, in one step."""

from datetime import timedelta

import pytest

from settled.domain.machine import ActionRecord, Step
from settled.domain.outcomes import DispatchOutcome, LookupOutcome
from settled.domain.states import State
from tests.unit.test_machine import KINDS, LOST, at, record

FOUND = LookupOutcome(result="applied", status_code=200, business_ref="b-7", detail="found")
NOT_FOUND = LookupOutcome(result="not_applied", status_code=404, detail="not found")
NO_ANSWER = LookupOutcome(result="inconclusive", status_code=503, detail="the lookup got 503")


def lost_then(lookup: LookupOutcome) -> DispatchOutcome:
    return LOST.model_copy(update={"lookup": lookup})


def sent(kind: str = "room_booking", **changes: object) -> ActionRecord:
    """An action of a run that looks lost sends up in their call, its send under way since 0 s."""
    action = record(kind, authorized=True, **changes)
    action.lookup_in_send = True
    action.begin_dispatch(at(0))
    return action


def states(action: ActionRecord) -> list[State]:
    return [entry.state for entry in action.history]


@pytest.mark.parametrize("kind", ["room_booking", "refund"])
def test_a_lost_answer_found_by_its_lookup_is_confirmed_in_one_step_and_the_loss_stays_recorded(
    kind: str,
) -> None:
    action = sent(kind)
    action.on_dispatch(lost_then(FOUND), at(1))
    status = action.status()
    assert (status.state, status.claim, status.business_ref) == (State.CONFIRMED, "done", "b-7")
    assert states(action) == [State.REQUESTED, State.RUNNING, State.UNKNOWN, State.CONFIRMED]
    assert [entry.note for entry in action.history[-2:]] == ["timeout", "found"]
    assert (action.attempts, action.lookups, action.last_lookup_at) == (1, 1, at(1))
    assert [entry.event for entry in action.log][-1:] == ["lookup"]
    step = action.next_step(at(1))
    assert step.action == "wait" and step.until == at(1) + timedelta(seconds=action.kind.keep_open_after_settled_s)


@pytest.mark.parametrize("kind", ["room_booking", "refund"])
def test_inside_the_horizon_a_not_found_leaves_it_unknown_on_the_usual_cadence(kind: str) -> None:
    """A 404 right after the loss proves nothing: the write may still land. Never "not applied"."""
    action = sent(kind, idempotency_header=None, commit_horizon_s=10.0)
    action.on_dispatch(lost_then(NOT_FOUND), at(1))
    status = action.status()
    assert (status.state, status.claim) == (State.UNKNOWN, "unknown")
    assert states(action) == [State.REQUESTED, State.RUNNING, State.UNKNOWN]
    assert action.possibly_applied and not action.resend_allowed and action.lookups == 1
    assert "may still be committing" in (status.reason or "")
    # The next lookup comes after the usual backoff (the second try's), no later than the horizon.
    assert action.next_step(at(1)) == Step(action="wait", until=at(3))
    assert action.next_step(at(3)).action == "lookup"


def test_with_deduplication_a_not_found_inside_the_horizon_resends_with_the_same_key() -> None:
    """As for any inconclusive lookup of a deduplicating service: sent again under its key."""
    action = sent(commit_horizon_s=10.0)
    action.on_dispatch(lost_then(NOT_FOUND), at(1))
    assert action.state is State.UNKNOWN and action.next_step(at(1)).action == "dispatch"


def test_a_lookup_that_gets_no_answer_leaves_it_unknown_as_before() -> None:
    action = sent("refund", idempotency_header=None)
    action.on_dispatch(lost_then(NO_ANSWER), at(1))
    assert (action.state, action.reason, action.lookups) == (State.UNKNOWN, "the lookup got 503", 1)
    assert action.next_step(at(1)) == Step(action="wait", until=at(3))


def test_without_a_horizon_a_not_found_right_after_the_loss_is_conclusive() -> None:
    """A kind that declares no commit horizon: the lookup was made after the send, so its 404 counts."""
    action = sent("refund", idempotency_header=None, commit_horizon_s=0.0)
    action.on_dispatch(lost_then(NOT_FOUND), at(1))
    assert action.state is State.UNKNOWN and not action.possibly_applied
    assert action.next_step(at(1)).action == "dispatch"


def test_a_lookup_that_finds_it_rejected_fails_it() -> None:
    action = sent("refund")
    rejected = LookupOutcome(result="rejected", status_code=200, detail="declined by the bank")
    action.on_dispatch(lost_then(rejected), at(1))
    status = action.status()
    assert (status.state, status.claim, status.reason) == (State.FAILED, "not_done", "declined by the bank")
    assert states(action) == [State.REQUESTED, State.RUNNING, State.UNKNOWN, State.FAILED]


def test_a_lookup_that_finds_it_accepted_and_unfinished_keeps_it_running_and_looked_up() -> None:
    action = sent("refund")
    pending = LookupOutcome(result="pending", status_code=200, business_ref="r-3", detail="processing")
    action.on_dispatch(lost_then(pending), at(1))
    status = action.status()
    assert (status.state, status.claim, status.business_ref) == (State.RUNNING, "in_progress", "r-3")
    assert states(action) == [State.REQUESTED, State.RUNNING, State.UNKNOWN, State.RUNNING]
    assert action.accepted and action.next_step(at(1)) == Step(action="wait", until=at(3))
    assert action.next_step(at(3)).action == "lookup"


def test_a_cancel_while_it_was_sent_meets_the_found_write_and_reverses_it() -> None:
    action = sent()
    action.apply_cancel("caller", None, at(0.5))
    action.on_dispatch(lost_then(FOUND), at(1))
    assert (action.state, action.compensation_pending) == (State.CONFIRMED, True)


def test_only_runs_that_ask_and_kinds_with_a_lookup_look_a_lost_send_up_in_its_call() -> None:
    assert not record(authorized=True).looks_up_lost_sends  # runs before LEAN_REVISION
    assert sent().looks_up_lost_sends
    assert not sent("refund", lookup=None).looks_up_lost_sends
    refund = KINDS.get("refund")
    assert refund is not None and refund.has_lookup


def test_a_lost_answer_recorded_without_a_lookup_is_unknown_and_looked_up_later_as_before() -> None:
    action = sent()
    action.on_dispatch(LOST, at(1))
    assert (action.state, action.lookups) == (State.UNKNOWN, 0)
    assert action.next_step(at(1)) == Step(action="wait", until=at(2))
