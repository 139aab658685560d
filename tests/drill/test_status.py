"""How the state arm reads an ActionStatus: its claim, a reversal under way, the route it called."""

from typing import Any

from settled.drill.arms.state import at_rest, claim_of, reversing, route_of


def status(state: str, **fields: Any) -> dict[str, Any]:
    claims = {"confirmed": "done", "cancelled": "not_done", "unknown": "unknown"}
    base = {
        "state": state,
        "authorized": True,
        "cancel_requested": False,
        "compensated": False,
        "reason": None,
        "claim": claims.get(state, "in_progress"),
        "log": [],
    }
    return {**base, **fields}


def test_waiting_for_a_go_ahead_is_a_prompt_and_at_rest() -> None:
    waiting = status("requested", authorized=False)
    assert claim_of(waiting) == "prompt" and at_rest(waiting)
    assert claim_of(status("requested")) == "in_progress" and not at_rest(status("requested"))


def test_a_confirmed_action_with_a_cancel_is_reversing_until_compensated_refused_or_too_late() -> None:
    assert reversing(status("confirmed", cancel_requested=True)) and not at_rest(
        status("confirmed", cancel_requested=True)
    )
    assert not reversing(status("confirmed", cancel_requested=True, reason="refused"))
    late = [{"event": "cancel_too_late", "note": "cannot be reversed"}]
    assert not reversing(status("confirmed", cancel_requested=True, log=late))
    assert at_rest(status("cancelled", cancel_requested=True, compensated=True))


def test_routes_are_named_without_their_ids() -> None:
    assert route_of("POST", "/v1/actions/op-1/authorize", 1.0) == "POST /v1/actions/{id}/authorize?wait"
    assert route_of("GET", "/v1/conversations/c-1/handoff", None) == "GET /v1/conversations/{id}/handoff"
    assert route_of("POST", "/v1/actions", None) == "POST /v1/actions"
