"""The customer-facing sentence for an action, derived from verified state only.

Never "done" unless the business system confirmed it; for `unknown`, say that the request was
sent, that its result is not confirmed, and that it is being checked before any retry. A kind may
override the plain sentence of a state (`[kinds.NAME.say]`); the sentences for a cancellation
that met an applied write are always the built-in ones, so an override cannot hide it.
"""

from typing import Any, Protocol

from settled.domain.kinds import KindSpec
from settled.domain.states import State
from settled.domain.templates import placeholders, render


class Sayable(Protocol):
    """What a sentence is made from: the facts of an action's record (the state machine's
    `ActionRecord` has them; this module needs nothing else of it)."""

    kind: KindSpec
    state: State
    operation_id: str
    params: dict[str, Any]
    params_redacted: bool
    authorized: bool
    reauthorization_needed: bool
    business_ref: str | None
    reason: str | None
    cancel_requested: bool
    compensated: bool
    compensation_pending: bool
    accepted: bool
    queued: bool


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def default_sentence(record: Sayable) -> str:
    what = record.kind.description
    ref = f" Your reference is {record.business_ref}." if record.business_ref else ""
    match record.state:
        case State.REQUESTED if record.reauthorization_needed and not record.authorized:
            return f"Nothing has been sent yet: the details changed, so I need your go-ahead to {what} now."
        case State.REQUESTED if record.kind.requires_authorization and not record.authorized:
            return f"Nothing has been sent yet: I need your go-ahead to {what}."
        case State.REQUESTED if record.queued:
            return (
                f"Nothing has been sent yet; the request to {what} is queued behind others to the same "
                "service and will be sent in its turn."
            )
        case State.REQUESTED:
            return f"Nothing has been sent yet; the request to {what} is queued and will be sent shortly."
        case State.RUNNING if record.accepted and record.cancel_requested:
            return (
                f"The service accepted the request to {what} and is still finishing it; "
                f"I'm checking it before I can cancel it.{ref}"
            )
        case State.RUNNING if record.accepted:
            return f"The service accepted the request to {what} and is finishing it; it isn't done yet.{ref}"
        case State.RUNNING if record.cancel_requested:
            return (
                f"The request to {what} is being sent; it may already have gone through, "
                "so I'll check before I can cancel it."
            )
        case State.RUNNING:
            return f"I'm sending the request to {what} now; it isn't confirmed yet."
        case State.UNKNOWN if record.cancel_requested:
            return (
                f"The request to {what} may already have gone through; I'm checking before I can cancel it."
            )
        case State.UNKNOWN:
            return (
                f"The request to {what} was sent, but I haven't confirmed the result. "
                "I'm checking it before trying again."
            )
        case State.CONFIRMED if record.cancel_requested and record.compensation_pending:
            return f"The request to {what} had already gone through; I'm reversing it now.{ref}"
        case State.CONFIRMED if record.cancel_requested and record.reason:
            return (
                f"The request to {what} had already gone through, and reversing it was refused "
                f"({record.reason}). It still stands.{ref}"
            )
        case State.CONFIRMED if record.cancel_requested:
            return (
                f"The cancellation came too late: the request to {what} had already gone through "
                f"and can't be reversed.{ref}"
            )
        case State.CONFIRMED:
            return f"Done: the request to {what} is confirmed.{ref}"
        case State.FAILED:
            why = record.reason or "it was refused"
            return f"The request to {what} didn't go through ({why}). Nothing was applied."
        case State.CANCELLED if record.compensated:
            return f"The request to {what} had gone through and has now been reversed.{ref}"
        case State.CANCELLED:
            return f"Cancelled: the request to {what} was never applied."
    raise AssertionError(f"no sentence for {record.state}")


def _special(record: Sayable) -> bool:
    """Situations whose truth an override written for the plain case could misstate."""
    if record.cancel_requested and record.state in (State.RUNNING, State.UNKNOWN, State.CONFIRMED):
        return True
    if record.state is State.RUNNING and record.accepted:  # accepted is not done: never hidden
        return True
    return record.state is State.CANCELLED and record.compensated


def say_for(record: Sayable) -> str:
    template = record.kind.say.get(record.state)
    if template is None or _special(record):
        return default_sentence(record)
    if record.params_redacted and any(name.startswith("params.") for name in placeholders(template)):
        return default_sentence(record)
    values: dict[str, Any] = {
        "params": record.params,
        "business_ref": record.business_ref,
        "reason": record.reason,
        "description": record.kind.description,
        "operation_id": record.operation_id,
    }
    return _capitalized(render(template, values))
