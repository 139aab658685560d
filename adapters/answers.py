"""What the model is told: a tool's result from verified state in plain words, the answer to "did
you do it?", and what a refused or unrecorded call says. Never "done" unless the business system
confirmed it."""

from settled.adapters.tools import AUTHORIZE_TOOL

from settled.client import SettledError
from settled.domain.models import ActionStatus
from settled.domain.states import State


def tool_answer(status: ActionStatus, authorize_tool: str | None = AUTHORIZE_TOOL) -> str:
    """The tool result: the verified state in plain words, then the sentence settled derives for it."""
    op = status.operation_id
    ref = f"Reference operation {op}."
    match status.state:
        case State.REQUESTED if not status.authorized:
            then = f"then call {authorize_tool} with operation_id {op}" if authorize_tool else "then confirm"
            head = (
                "Recorded; nothing has been sent yet: it needs the caller's go-ahead. Ask the caller "
                f"to confirm, {then}. {ref}"
            )
        case State.REQUESTED | State.RUNNING:
            head = f"Request recorded and being sent; not confirmed yet. {ref}"
        case State.UNKNOWN:
            head = (
                "Request sent, but its result is not verified yet; it is being checked and will not "
                f"be sent twice. Do not say it is done. {ref}"
            )
        case State.CONFIRMED if status.compensating:
            head = f"It went through and is being reversed now; not final yet. {ref}"
        case State.CONFIRMED:
            head = f"CONFIRMED by the business system. {ref}"
        case State.FAILED:
            head = f"NOT DONE: the business system did not accept it. {ref}"
        case State.CANCELLED:
            head = f"NOT DONE: it was cancelled. {ref}"
    return f"{head} Tell the caller: {status.say}"


_CLAIM_WORDS = {
    "done": "CONFIRMED",
    "in_progress": "NOT CONFIRMED YET (in progress)",
    "unknown": "NOT VERIFIED (being checked; do not retry it)",
    "not_done": "NOT DONE",
}


def check_line(status: ActionStatus) -> str:
    ref = f", reference {status.business_ref}" if status.business_ref else ""
    claim = "CONFIRMED, and being reversed now" if status.compensating else _CLAIM_WORDS[status.claim]
    return f"{status.kind} (operation {status.operation_id}{ref}): {claim}. {status.say}"


def check_answer(statuses: list[ActionStatus]) -> str:
    """The answer to "did you do it?": a line per request, from verified state."""
    if not statuses:
        return "Nothing has been requested in this conversation."
    return "\n".join(check_line(status) for status in statuses)


def error_answer(error: SettledError) -> str:
    if error.code in ("invalid_params", "invalid_request"):
        return f"Not recorded: the details are not valid ({error.message}). Nothing was sent."
    if error.code == "operation_conflict":
        # Asking again cannot help: the id is another request's. Nothing of that request is told.
        return (
            "Not recorded: its operation id belongs to another request (operation_conflict). Nothing "
            "was sent for this one. Do not say it is done."
        )
    return (
        f"Could not confirm the request was recorded ({error.code}). Do not say it is done. "
        "Calling again with the same details is safe: it cannot create a second request."
    )
