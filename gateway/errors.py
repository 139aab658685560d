"""What a failed Temporal call means to a caller: a `GatewayError` carrying the API's error code, the
one guard every call goes through, and how a call that finds nothing is read as nothing."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import (
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")
# What a caller is told of an id it may not see, or that names nothing: the same words either way.
NOT_FOUND = "no such operation or conversation"
# How long past a caller's wait an answer from Temporal may take before the caller is told to retry.
ANSWER_GRACE_S = 8.0


class GatewayError(Exception):
    """A call the API answers with an error: `code` is the API's error code (not_found,
    operation_conflict, temporal_unavailable, ...). The client's errors are `settled.client`'s own."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def guard(call: Callable[[], Awaitable[T]], wait_s: float, grace_s: float) -> T:
    """Run a Temporal call and map its failures to the API's codes. A call is answered within the
    caller's wait plus a grace: an update is answered only once a worker has run it, which under a
    backlog can be long after; the caller is then told to retry, not kept hanging."""
    try:
        return await asyncio.wait_for(call(), wait_s + grace_s)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise GatewayError(
            "temporal_unavailable",
            f"Temporal did not answer within {wait_s + grace_s:g}s (busy); the call may have "
            "been recorded: repeat it (with the same operation_id) to learn the state",
        ) from None
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type:
            raise GatewayError(cause.type, cause.message) from None
        raise GatewayError("invalid_request", str(cause)) from None
    except (WorkflowQueryRejectedError, WorkflowQueryFailedError) as error:
        raise GatewayError("invalid_request", str(error)) from None
    except RPCError as error:
        if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            raise GatewayError("temporal_unavailable", f"Temporal is unavailable: {error.message}") from None
        if error.status is RPCStatusCode.NOT_FOUND:
            raise GatewayError("not_found", NOT_FOUND) from None
        raise


async def unless_missing(call: Awaitable[T], *also: str) -> T | None:
    """The guarded call's answer, or None where it found no such workflow (or failed with one of the
    codes in `also`)."""
    try:
        return await call
    except GatewayError as error:
        if error.code != "not_found" and error.code not in also:
            raise
        return None


def never_ran(error: RPCError) -> bool:
    """A query refused because no workflow task of the run has run (so no worker can answer it)."""
    return error.status is RPCStatusCode.FAILED_PRECONDITION


def already_started(error: Exception) -> bool:
    """A start refused because a run with its id exists (a server may say so without the details the
    SDK turns into WorkflowAlreadyStartedError)."""
    return not isinstance(error, RPCError) or error.status is RPCStatusCode.ALREADY_EXISTS
