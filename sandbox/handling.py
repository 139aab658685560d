"""Running one business operation through whatever fault it meets.

An operation is an Action: `apply()` does it (commits, for writes) and says what to answer;
`abandon()` gives it up (frees an idempotency claim). The fault decides whether and when each is
called and what the client gets to see.
"""

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from fastapi.responses import JSONResponse
from settled.sandbox.drop import DroppedResponse
from settled.sandbox.errors import error_body
from settled.sandbox.faults import Fault, Verdict
from settled.sandbox.requestlog import LoggedCall
from settled.sandbox.state import Sandbox
from starlette.requests import Request
from starlette.responses import Response

HUNG_STATUS = 504


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    outcome: str
    headers: dict[str, str] = field(default_factory=dict)


def error_reply(status: int, code: str, message: str, outcome: str, **extra: Any) -> Reply:
    return Reply(status, error_body(code, message, **extra), outcome)


class Action(Protocol):
    def apply(self) -> Reply: ...

    def abandon(self) -> None: ...


@runtime_checkable
class LaggingRead(Protocol):
    """A read that can be served by a replica that lags (fault mode `stale`)."""

    def apply_lagging(self, lag_s: float) -> Reply: ...


def answer(sandbox: Sandbox, call: LoggedCall, reply: Reply) -> Response:
    sandbox.log.finish(call, reply.outcome, reply.status)
    return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)


async def guarded(sandbox: Sandbox, call: LoggedCall, work: Awaitable[Response]) -> Response:
    """Close the request's log row even when handling it fails or is cancelled (shutdown)."""
    try:
        return await work
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            sandbox.log.finish(
                call, "interrupted" if isinstance(exc, asyncio.CancelledError) else "error", None
            )
        raise


async def perform(
    sandbox: Sandbox, call: LoggedCall, identity: Iterable[str | None], request: Request, action: Action
) -> Response:
    fault = sandbox.faults.take(call.service, call.op, [part for part in identity if part])
    sandbox.busy += 1
    try:
        if fault is None:
            return answer(sandbox, call, action.apply())
        sandbox.log.note(call, fault=fault.id)
        if fault.spec.unseen:
            sandbox.unseen.add(call.seq)
        return await _faulted(sandbox, call, request, action, fault)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            action.abandon()
        raise
    finally:
        sandbox.busy -= 1
        sandbox.unseen.discard(call.seq)


def _injected(fault: Fault, what: str) -> str:
    label = f" ({fault.spec.label})" if fault.spec.label else ""
    return f"injected fault {fault.id}{label}: {what}"


def _stale(sandbox: Sandbox, call: LoggedCall, verdict: Verdict | str | None) -> bool:
    return verdict == "abort" or call.generation != sandbox.db.generation


def _aborted(sandbox: Sandbox, call: LoggedCall, action: Action) -> Response:
    action.abandon()
    reply = error_reply(503, "unavailable", "the sandbox was reset or is stopping", "aborted")
    return answer(sandbox, call, reply)


async def _faulted(
    sandbox: Sandbox, call: LoggedCall, request: Request, action: Action, fault: Fault
) -> Response:
    mode = fault.mode
    outcome = f"fault:{mode}"
    if mode == "fail_before_apply":
        action.abandon()
        reply = error_reply(fault.status, "unavailable", _injected(fault, "failed before applying"), outcome)
        return answer(sandbox, call, reply)
    if mode == "unauthorized":
        action.abandon()
        quoted = request.headers.get("authorization", "no credentials")
        reply = error_reply(fault.status, "unauthorized", f"invalid credentials: {quoted}", outcome)
        return answer(sandbox, call, reply)
    if mode == "reject":
        action.abandon()
        reply = error_reply(fault.status, "rejected_by_fault", _injected(fault, "rejected"), outcome)
        return answer(sandbox, call, reply)
    if mode == "error_after_apply":
        action.apply()
        reply = error_reply(
            fault.status, "internal_error", _injected(fault, "failed after applying"), outcome
        )
        return answer(sandbox, call, reply)
    if mode == "drop_after_apply":
        applied = action.apply()
        sandbox.log.finish(call, outcome, None)
        return DroppedResponse(applied.status)
    if mode == "delay":
        sandbox.log.note(call, "delayed")
        verdict = await fault.gate.wait(fault.delay_s)
        if _stale(sandbox, call, verdict):
            return _aborted(sandbox, call, action)
        return answer(sandbox, call, action.apply())
    if mode == "hold":
        return await _held(sandbox, call, action, fault)
    if mode == "stale":
        assert isinstance(action, LaggingRead), "stale is a fault of lookups"
        return answer(sandbox, call, action.apply_lagging(fault.delay_s))
    return await _hung(sandbox, call, request, action, fault)


async def _held(sandbox: Sandbox, call: LoggedCall, action: Action, fault: Fault) -> Response:
    # The client may give up meanwhile; the request still goes on when released, as a real one would.
    sandbox.log.note(call, "held")
    verdict = await fault.gate.wait()
    if _stale(sandbox, call, verdict):
        return _aborted(sandbox, call, action)
    if verdict == "proceed" or fault.apply:
        return answer(sandbox, call, action.apply())
    action.abandon()
    reply = error_reply(
        fault.status, "unavailable", _injected(fault, "released without applying"), "fault:hold"
    )
    return answer(sandbox, call, reply)


async def _hung(
    sandbox: Sandbox, call: LoggedCall, request: Request, action: Action, fault: Fault
) -> Response:
    applied = action.apply() if fault.apply else None
    sandbox.log.note(call, "hanging")
    ended = await _hang(request, fault)
    if _stale(sandbox, call, ended):
        return _aborted(sandbox, call, action)
    if ended == "proceed":
        # Faults were cleared while it hung: answer as if there had been none.
        return answer(sandbox, call, applied or action.apply())
    return _drop(sandbox, call, action)


def _drop(sandbox: Sandbox, call: LoggedCall, action: Action) -> Response:
    action.abandon()
    sandbox.log.finish(call, "fault:hang", None)
    return DroppedResponse(HUNG_STATUS)


async def _hang(request: Request, fault: Fault) -> Verdict | Literal["disconnected", "timeout"]:
    """Wait until the client goes away, the hang's time is up, or the fault's gate opens."""
    opened = asyncio.ensure_future(fault.gate.wait(fault.delay_s))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({opened, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (opened, gone):
            task.cancel()
        await asyncio.gather(opened, gone, return_exceptions=True)
    if gone.done() and not gone.cancelled():
        return "disconnected"
    verdict = opened.result() if opened.done() and not opened.cancelled() else None
    return verdict or "timeout"


async def _disconnected(request: Request) -> None:
    # The body was read already, so the next message the server sends is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass
