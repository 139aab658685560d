"""How the state arm reads an ActionStatus: its claim, and a reversal under way."""

from typing import Any

from settled.drill.arms.state import at_rest, claim_of, reversing

from settled.domain.models import ActionStatus

AT = "2026-01-01T00:00:00Z"


def status(state: str, **fields: Any) -> ActionStatus:
    claims = {"confirmed": "done", "cancelled": "not_done", "unknown": "unknown"}
    base = {
        "operation_id": "op-1",
        "conversation_id": "c-1",
        "kind": "room_booking",
        "params": {},
        "state": state,
        "authorized": True,
        "dispatched": state != "requested",
        "attempts": 1,
        "business_ref": None,
        "reason": None,
        "cancel_requested": False,
        "compensated": False,
        "needs_attention": False,
        "claim": claims.get(state, "in_progress"),
        "say": "",
        "presented": None,
        "history": [],
        "updated_at": AT,
        "log": [],
    }
    return ActionStatus.model_validate({**base, **fields})


def test_waiting_for_a_go_ahead_is_a_prompt_and_at_rest() -> None:
    waiting = status("requested", authorized=False)
    assert claim_of(waiting) == "prompt" and at_rest(waiting)
    assert claim_of(status("requested")) == "in_progress" and not at_rest(status("requested"))


def test_a_confirmed_action_with_a_cancel_is_reversing_until_compensated_refused_or_too_late() -> None:
    assert reversing(status("confirmed", cancel_requested=True)) and not at_rest(
        status("confirmed", cancel_requested=True)
    )
    assert not reversing(status("confirmed", cancel_requested=True, reason="refused"))
    late = [{"at": AT, "event": "cancel_too_late", "note": "cannot be reversed"}]
    assert not reversing(status("confirmed", cancel_requested=True, log=late))
    assert at_rest(status("cancelled", cancel_requested=True, compensated=True))
