"""The six states of a consequential action and what may be said about each (docs/reference.md)."""

from enum import StrEnum
from typing import Literal


class State(StrEnum):
    REQUESTED = "requested"
    RUNNING = "running"
    UNKNOWN = "unknown"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    CANCELLED = "cancelled"


Claim = Literal["done", "not_done", "in_progress", "unknown"]

# Settled: the business system has answered for good. (A confirmed action may still be
# compensated on a later cancel, so "settled" is not "closed".)
SETTLED: frozenset[State] = frozenset({State.CONFIRMED, State.FAILED, State.CANCELLED})
# Still moving without anyone's input, unless it waits for authorization.
IN_PROGRESS: frozenset[State] = frozenset({State.REQUESTED, State.RUNNING})
# A request may be at the business system right now, or may have been applied unseen.
MAY_BE_IN_FLIGHT: frozenset[State] = frozenset({State.RUNNING, State.UNKNOWN})

_CLAIMS: dict[State, Claim] = {
    State.CONFIRMED: "done",
    State.FAILED: "not_done",
    State.CANCELLED: "not_done",
    State.REQUESTED: "in_progress",
    State.RUNNING: "in_progress",
    State.UNKNOWN: "unknown",
}


def claim_for(state: State) -> Claim:
    """The only claim a channel may make, derived from the state alone."""
    return _CLAIMS[state]
