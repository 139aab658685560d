"""A send whose answer is lost, looked up in the same business call (runs since LEAN_REVISION): the state
machine records the lost answer and then the lookup's, by the usual rules of a lookup, in one step."""

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
    assert (action.attempts, action.lookups) == (1, 1)
    assert [entry.event for entry in action.log][-1:] == ["lookup"]
    assert action.next_step(at(1)).action in ("wait", "close")  # nothing more to send or look up


@pytest.mark.parametrize("kind", ["room_booking", "refund"])
def test_inside_the_horizon_a_not_found_leaves_it_unknown_on_the_usual_cadence(kind: str) -> None:
    """A 404 right after the loss proves nothing: the write may still land. Never "not applied"."""
    action = sent(kind, idempotency_header=None, commit_horizon_s=10.0)
    action.on_dispatch(lost_then(NOT_FOUND), at(1))
    status = action.status()
    assert (status.state, status.claim, status.reason) == (State.UNKNOWN, "unknown", "timeout")
    assert states(action) == [State.REQUESTED, State.RUNNING, State.UNKNOWN]
    assert action.possibly_applied and not action.resend_allowed and action.lookups == 1
    assert action.log[-1].event == "lookup" and "not found" in action.log[-1].note
    # Looked up again after the usual first backoff, as any lost answer is; a 404 then still waits
    # for the horizon (the usual rules).
    assert action.next_step(at(1)) == Step(action="wait", until=at(2))
    assert action.next_step(at(2)).action == "lookup"
    action.on_lookup(NOT_FOUND, at(2))
    assert action.state is State.UNKNOWN and not action.resend_allowed


def test_a_not_found_inside_the_horizon_is_looked_up_again_by_its_end_at_the_latest() -> None:
    """A kind looked up rarely (a 600 s first backoff): its early 404 still brings the next lookup to
    the horizon's end, where a 404 counts, as any early 404 does."""
    action = sent(
        "refund",
        idempotency_header=None,
        commit_horizon_s=4.0,
        reconcile_initial_interval_s=600.0,
        reconcile_max_interval_s=600.0,
    )
    action.on_dispatch(lost_then(NOT_FOUND), at(1))
    assert "may commit up to 4s" in action.log[-1].note
    assert action.next_step(at(1)) == Step(action="wait", until=at(5))
    assert action.next_step(at(5)).action == "lookup"
    action.on_lookup(NOT_FOUND, at(5))  # past the horizon: conclusive, so it may be sent again
    assert action.next_step(at(5)).action == "dispatch"


@pytest.mark.parametrize(
    ("lookup", "changes"),
    [
        (NOT_FOUND, {"commit_horizon_s": 10.0}),  # deduplicates: a re-send under the key is safe
        (NO_ANSWER, {}),
        (NOT_FOUND, {"commit_horizon_s": 0.0, "idempotency_header": None}),  # no horizon at all
    ],
    ids=["deduplicating", "no-answer", "no-horizon"],
)
def test_a_lookup_in_the_call_that_concludes_nothing_never_hastens_a_resend(
    lookup: LookupOutcome, changes: dict[str, object]
) -> None:
    """What the lookup in the call leaves open goes on exactly as a lost answer does: the first look
    after the usual backoff, and only then a re-send where one is safe. A service that drops every
    answer is never sent to in a tight loop of sends and lookups."""
    action = sent(**changes)
    action.on_dispatch(lost_then(lookup), at(1))
    assert action.state is State.UNKNOWN and not action.resend_allowed and action.lookups == 1
    assert action.next_step(at(1)) == Step(action="wait", until=at(2))
    assert action.next_step(at(2)).action == "lookup"
    action.on_lookup(lookup, at(2))  # the usual look: its usual rules allow the re-send
    assert action.next_step(at(2)).action == "dispatch"


def test_a_reconcile_right_after_a_lookup_in_the_call_that_concluded_nothing_looks_again() -> None:
    """The caller heard "checking" and asks: the lookup made with the send answers no one's reconcile."""
    action = sent("refund", idempotency_header=None)
    action.on_dispatch(lost_then(NO_ANSWER), at(1))
    action.check_reconcile(at(1.2))  # not refused as "just looked up"
    action.apply_reconcile("the caller asked", at(1.2))
    assert action.next_step(at(1.2)).action == "lookup"


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
