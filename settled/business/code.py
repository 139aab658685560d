"""Code kinds: importing a kind's handler (`module:attr`) and calling it under settled's rules.

A handler only reports (settled.handlers); this module turns each report into the verdict the state
machine reads. Anything else — an exception, a wrong return value, a call that outlives the kind's
`timeout_s` — is `Unknown`: the call may have reached the service.
"""

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from settled.domain.kinds import HandlerTraits, Kinds, KindSpec
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.handlers import Applied, NotApplied, NotSent, Pending, Rejected, Request, Unknown


class HandlerError(ValueError):
    """A handler that cannot be used; the message names the kind and the handler."""


def import_handler(kind: KindSpec) -> Any:
    assert kind.handler is not None
    module_name, _, attribute = kind.handler.partition(":")
    where = f"kind {kind.name}: handler {kind.handler!r}"
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure to import refuses start-up, named
        raise HandlerError(
            f"{where}: cannot import {module_name} ({type(error).__name__}: {error})"
        ) from None
    handler = getattr(module, attribute, None)
    if handler is None:
        raise HandlerError(f"{where}: {module_name} has no attribute {attribute}")
    if not callable(getattr(handler, "dispatch", None)):
        raise HandlerError(f"{where}: has no dispatch method")
    for method in ("dispatch", "lookup", "compensate"):
        function = getattr(handler, method, None)
        if function is not None and not inspect.iscoroutinefunction(function):
            raise HandlerError(f"{where}: {method} must be an async method (async def)")
    return handler


def traits(handler: Any) -> HandlerTraits:
    return HandlerTraits(
        deduplicates=getattr(handler, "deduplicates", False) is True,
        authoritative_lookup=getattr(handler, "authoritative_lookup", False) is True,
        lookup=callable(getattr(handler, "lookup", None)),
        compensate=callable(getattr(handler, "compensate", None)),
    )


def with_handlers(kinds: Kinds, serving: Iterable[str] | None = None) -> tuple[Kinds, dict[str, Any]]:
    """The kinds with each code kind's traits filled in, and the imported handlers by kind name. Every
    code kind is imported where its traits are needed (the API offers them all); `serving` limits the
    returned handlers to the kinds this process sends requests for."""
    specs: dict[str, KindSpec] = {}
    handlers: dict[str, Any] = {}
    wanted = None if serving is None else set(serving)
    for kind in kinds:
        if kind.handler is None:
            specs[kind.name] = kind
            continue
        handler = import_handler(kind)
        specs[kind.name] = kind.model_copy(update={"handler_traits": traits(handler)})
        if wanted is None or kind.name in wanted:
            handlers[kind.name] = handler
    return Kinds(specs, kinds.source), handlers


async def _report(call: Callable[[Request], Awaitable[Any]], request: Request) -> Any:
    """The handler's report, or an `Unknown` for anything but a report."""
    try:
        return await asyncio.wait_for(call(request), timeout=request.timeout_s)
    except TimeoutError:
        return Unknown(f"the handler did not answer within {request.timeout_s:g}s")
    except Exception as error:
        return Unknown(f"the handler raised {type(error).__name__}: {error}"[:300])


def _wrong(report: Any, allowed: str) -> str:
    return f"the handler returned {type(report).__name__}, not one of {allowed}"


async def dispatch(handler: Any, request: Request) -> DispatchOutcome:
    match await _report(handler.dispatch, request):
        case Applied(reference=ref):
            return DispatchOutcome(result="confirmed", business_ref=ref, detail="the service confirmed it")
        case Pending(reference=ref):
            return DispatchOutcome(
                result="pending", business_ref=ref, detail="the service accepted it and is finishing it"
            )
        case Rejected(reason=reason):
            return DispatchOutcome(result="rejected", detail=f"the service refused it ({reason})")
        case NotSent(reason=reason):
            return DispatchOutcome(result="not_sent", detail=f"nothing was sent ({reason})")
        case Unknown(reason=reason):
            return DispatchOutcome(result="unknown", detail=f"no verdict from the service ({reason})")
        case report:
            return DispatchOutcome(
                result="unknown", detail=_wrong(report, "Applied, Pending, Rejected, Unknown, NotSent")
            )


async def lookup(handler: Any, request: Request, authoritative: bool) -> LookupOutcome:
    """`NotApplied` proves something only from a handler whose lookup is authoritative."""
    match await _report(handler.lookup, request):
        case Applied(reference=ref):
            return LookupOutcome(result="applied", business_ref=ref, detail="the lookup found it applied")
        case Pending(reference=ref):
            return LookupOutcome(
                result="pending", business_ref=ref, detail="the lookup found it accepted, not finished yet"
            )
        case Rejected(reason=reason):
            return LookupOutcome(
                result="rejected", detail=f"the service ended it without applying it ({reason})"
            )
        case NotApplied() if authoritative:
            return LookupOutcome(result="not_applied", detail="the lookup says it was never applied")
        case NotApplied():
            return LookupOutcome(
                result="inconclusive", detail="the lookup did not find it (not authoritative)"
            )
        case Unknown(reason=reason) | NotSent(reason=reason):
            return LookupOutcome(result="inconclusive", detail=f"the lookup was inconclusive ({reason})")
        case report:
            return LookupOutcome(
                result="inconclusive",
                detail=_wrong(report, "Applied, Pending, Rejected, NotApplied, Unknown"),
            )


async def compensate(handler: Any, request: Request) -> CompensationOutcome:
    match await _report(handler.compensate, request):
        case Applied():
            return CompensationOutcome(result="compensated", detail="the service reversed it")
        case Rejected(reason=reason):
            return CompensationOutcome(
                result="rejected", detail=f"the service refused to reverse it ({reason})"
            )
        case Unknown(reason=reason) | NotSent(reason=reason):
            return CompensationOutcome(result="unknown", detail=f"no verdict on the reversal ({reason})")
        case report:
            return CompensationOutcome(result="unknown", detail=_wrong(report, "Applied, Rejected, Unknown"))
