"""Code kinds: a kind whose business call is Python code (a vendor SDK, a signed request, a queue).

A kinds file names the object (`handler = "my_app.payments:refund"`); it has an async `dispatch` and,
optionally, `lookup` and `compensate`, each taking a `Request` and returning one of the answers below.
The handler only reports what the service said; settled decides what it means for the action with
the same rules as for an HTTP kind (the commit horizon, no re-send unless it cannot apply twice).
A call that raises, returns anything else, or outlives `timeout_s` counts as `Unknown`.

Two class attributes tell settled what the service guarantees:
- `deduplicates = True`: re-sending with the same `request.operation_key` cannot apply twice;
- `authoritative_lookup = True`: a lookup's `NotApplied` proves the write was not applied.

Part of the light install: pydantic-free, standard library only.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Request:
    """One call of an action's handler."""

    operation_id: str
    # What the service should see as the operation's identity (its idempotency key, a metadata field):
    # the operation id, or `TENANT:operation_id` when the API has keys.
    operation_key: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    business_ref: str | None = None
    # Dispatches of this action that may have reached the service before this one.
    attempt: int = 0
    timeout_s: float = 5.0


@dataclass(frozen=True)
class Applied:
    """The service applied it (a dispatch or lookup), or reversed it (a compensation)."""

    reference: str | None = None


@dataclass(frozen=True)
class Pending:
    """The service accepted it and has not finished it: settled looks it up until it is final."""

    reference: str | None = None


@dataclass(frozen=True)
class Rejected:
    """The service refused it (dispatch, compensation), or ended it without applying it (lookup)."""

    reason: str


@dataclass(frozen=True)
class NotApplied:
    """A lookup found no such write."""


@dataclass(frozen=True)
class Unknown:
    """It may have reached the service and what happened is not known (a timeout, a 5xx)."""

    reason: str


@dataclass(frozen=True)
class NotSent:
    """Nothing reached the service (no connection): retried like a connection never made."""

    reason: str


Answer = Applied | Pending | Rejected | NotApplied | Unknown | NotSent

__all__ = ["Answer", "Applied", "NotApplied", "NotSent", "Pending", "Rejected", "Request", "Unknown"]
