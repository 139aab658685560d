"""The three business activities: dispatch, lookup, compensate.

Each makes exactly one request (an HTTP request shaped by settled.business.shapes, or one call of a
code kind's handler) and returns what the answer means (settled.business.answers); none raises for a
business answer, so Temporal never retries a write on its own. Secrets are read here, as each request
is built, and scrubbed from whatever text the answer brings back.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx
from settled.activities.inputs import COMPENSATE, DISPATCH, LOOKUP, SENDING, BusinessCall
from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from settled.business import code
from settled.business.answers import (
    Transport,
    classify_compensation,
    classify_compensation_transport,
    classify_dispatch,
    classify_dispatch_transport,
    classify_lookup,
    classify_lookup_transport,
)
from settled.business.secrets import SecretError, read_secret, scrub
from settled.business.shapes import Role, Values, build
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.handlers import Request
from settled.runtime import tracing

T = TypeVar("T")
Outcome = TypeVar("Outcome", DispatchOutcome, LookupOutcome, CompensationOutcome)
HEARTBEAT_EVERY_S = 0.5
# A lost send's lookup in the same call (`BusinessCall.look_up_if_lost`) has the kind's own timeout at
# most, and only what the call's `start_to_close_timeout` leaves after keeping this much for its answer
# to reach the workflow; with less than the shortest worth trying left, the lookup is not made (the
# action is `unknown` and looked up on its usual cadence, as without it).
LOST_LOOKUP_MARGIN_S = 1.0
LOST_LOOKUP_AT_LEAST_S = 0.5


def _transport_failure(error: httpx.TransportError) -> Transport:
    if isinstance(
        error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol
    ):
        return "not_connected"
    if isinstance(error, httpx.TimeoutException):
        return "timeout"
    return "broken"


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:200] if str(error) else type(error).__name__


def _json(response: httpx.Response) -> Any:
    """The answer's JSON; a short plain-text answer as its text (a reason in the service's words)."""
    try:
        return response.json()
    except ValueError:
        if not response.headers.get("content-type", "").startswith("text/plain"):
            return None
        return response.text.strip()[:300] or None


async def _heartbeating(work: Awaitable[T]) -> T:
    """Heartbeat while the request runs, so a killed worker is noticed in seconds, not at the timeout."""
    task = asyncio.ensure_future(work)
    if activity.info().is_local:  # inside a workflow task: the task's own timeout guards it
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
            if done:
                return task.result()
            activity.heartbeat()
    except asyncio.CancelledError:  # no one waits for the answer any more (as `await task` above)
        task.cancel()
        raise


async def _despite_cancel(work: Awaitable[T]) -> T:
    """Finish `work` even when the activity is cancelled meanwhile (a request under way is answered,
    not abandoned halfway)."""
    task = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()


def _count(name: str, description: str, call: BusinessCall, result: str) -> None:
    activity.metric_meter().create_counter(name, description).add(
        1, {"kind": call.kind.name, "result": result}
    )


async def _take_turn() -> BusinessCall | str:
    """A queued send's turn, for runs before QUEUE_REVISION: the workflow records that it is sending
    now and answers with what to send, or refuses (cancelled, or its authorization withdrawn, while it
    waited): why, as text."""
    info = activity.info()
    handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
    try:
        return await _heartbeating(handle.execute_update(SENDING, result_type=BusinessCall))
    except WorkflowUpdateFailedError as error:
        return str(error.cause) if error.cause else "the action refused the send"
    except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:  # not recorded: must not leave
        return f"could not record the send ({type(error).__name__})"


async def _measured(
    name: str, call: BusinessCall, work: Awaitable[Outcome], metric: str, description: str
) -> Outcome:
    """One business call in its span, counted by what its answer meant."""
    operation_id, code_kind = call.operation_id or call.operation_key, call.kind.handler is not None
    with tracing.business_call(name, operation_id, call.kind.name, call.attempt, code_kind) as span:
        outcome = await work
        tracing.outcome(span, outcome.result)
    _count(metric, description, call, outcome.result)
    return outcome


async def _measured_lookup(call: BusinessCall, work: Awaitable[LookupOutcome]) -> LookupOutcome:
    return await _measured(
        LOOKUP, call, work, "settled_reconciliation_lookups", "lookups sent to business systems"
    )


def _values(call: BusinessCall) -> Values:
    return Values(operation_id=call.operation_key, params=call.params, business_ref=call.business_ref)


class BusinessActivities:
    """`handlers`: the imported handler of each code kind this process sends for (settled.business.code)."""

    def __init__(self, http: httpx.AsyncClient, handlers: Mapping[str, Any] | None = None) -> None:
        self._http = http
        self._handlers = dict(handlers or {})

    def _handler(self, call: BusinessCall) -> Any | None:
        if call.kind.handler is None:
            return None
        handler = self._handlers.get(call.kind.name)
        if handler is None:  # a kind added since start-up: imported once, here
            handler = self._handlers[call.kind.name] = code.import_handler(call.kind)
        return handler

    def _request(self, call: BusinessCall) -> Request:
        return Request(
            operation_id=call.operation_id or call.operation_key,
            operation_key=call.operation_key,
            kind=call.kind.name,
            params=call.params,
            business_ref=call.business_ref,
            attempt=call.attempt,
            timeout_s=call.kind.timeout_s,
        )

    async def _http_call(
        self,
        call: BusinessCall,
        role: Role,
        answer: Callable[[httpx.Response], Outcome],
        lost: Callable[[Transport, str], Outcome],
    ) -> Outcome:
        """One HTTP request. Nothing raised here leaves the activity: an error would carry its text
        into the workflow's history, and the text of a request may hold a secret."""
        try:
            outgoing = build(call.kind, role, _values(call), read_secret)
        except SecretError as error:  # unset since start-up: nothing was sent
            return lost("not_connected", str(error))
        tracing.request(outgoing.method, outgoing.url, outgoing.secrets)
        try:
            response = await _heartbeating(
                self._http.request(
                    outgoing.method,
                    outgoing.url,
                    headers=tracing.carry(outgoing.headers),
                    content=outgoing.content,
                    timeout=call.kind.timeout_s,
                )
            )
            tracing.status_code(response.status_code)
            outcome = answer(response)
        except httpx.TransportError as error:
            outcome = lost(_transport_failure(error), _describe(error))
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:  # one httpx would not make
            outcome = lost("not_connected", f"the request could not be made ({type(error).__name__})")
        if outgoing.secrets:
            outcome = outcome.model_copy(update={"detail": scrub(outcome.detail, outgoing.secrets)})
        return outcome

    @activity.defn(name=DISPATCH)
    async def dispatch(self, call: BusinessCall) -> DispatchOutcome:
        began = time.monotonic()
        if call.from_queue:
            # Temporal recorded that this worker took it: it is sending, and a cancel now is too late.
            outcome = await _despite_cancel(self._dispatch(call, began))
            return outcome.model_copy(update={"taken_at": activity.info().started_time})
        if call.queued:
            turn = await _take_turn()
            if isinstance(turn, str):
                return DispatchOutcome(result="not_sent", detail=f"not sent: {turn}")
            call = turn
        return await self._dispatch(call, began)

    async def _dispatch(self, call: BusinessCall, began: float) -> DispatchOutcome:
        outcome = await _measured(
            DISPATCH, call, self._send(call), "settled_dispatches", "write requests sent to business systems"
        )
        if outcome.result != "unknown" or not (call.look_up_if_lost and call.kind.has_lookup):
            return outcome
        # It may have been applied: look it up once, now, in this call. A read, never a second send.
        left_s = self._left_for_lookup(call, began)
        if left_s is None:
            return outcome
        return outcome.model_copy(update={"lookup": await self._look_up_lost(call, left_s)})

    @staticmethod
    def _left_for_lookup(call: BusinessCall, began: float) -> float | None:
        """The seconds a lost send's lookup may take: within what the call's own timeout leaves."""
        budget = activity.info().start_to_close_timeout
        left_s = call.kind.timeout_s if budget is None else budget.total_seconds()
        left_s -= time.monotonic() - began + LOST_LOOKUP_MARGIN_S
        seconds = min(call.kind.timeout_s, left_s)
        return seconds if seconds >= LOST_LOOKUP_AT_LEAST_S else None

    async def _look_up_lost(self, call: BusinessCall, seconds: float) -> LookupOutcome:
        """The lookup of a send whose answer was lost, bounded by `seconds` (as its request's timeout,
        and as a whole): one that does not answer in time is inconclusive."""
        short = call.model_copy(update={"kind": call.kind.model_copy(update={"timeout_s": seconds})})

        async def bounded() -> LookupOutcome:
            try:
                async with asyncio.timeout(seconds):
                    return await self._look_up(short)
            except TimeoutError:
                return LookupOutcome(
                    result="inconclusive", detail=f"the lookup did not answer within {seconds:.3g}s"
                )

        return await _measured_lookup(short, bounded())

    async def _send(self, call: BusinessCall) -> DispatchOutcome:
        kind = call.kind
        handler = self._handler(call)
        if handler is not None:
            outcome = await _heartbeating(code.dispatch(handler, self._request(call)))
        else:
            assert kind.dispatch is not None
            spec = kind.dispatch
            outcome = await self._http_call(
                call,
                "dispatch",
                lambda response: classify_dispatch(
                    kind, spec, response.status_code, _json(response), _values(call)
                ),
                classify_dispatch_transport,
            )
        return outcome

    @activity.defn(name=LOOKUP)
    async def lookup(self, call: BusinessCall) -> LookupOutcome:
        return await _measured_lookup(call, self._look_up(call))

    async def _look_up(self, call: BusinessCall) -> LookupOutcome:
        kind = call.kind
        handler = self._handler(call)
        if handler is not None:
            request = self._request(call)
            outcome = await _heartbeating(code.lookup(handler, request, kind.authoritative_lookup))
        else:
            spec = kind.lookup
            assert spec is not None, "lookup scheduled for a kind without one"
            outcome = await self._http_call(
                call,
                "lookup",
                lambda response: classify_lookup(
                    kind, spec, response.status_code, _json(response), _values(call)
                ),
                lambda _, error: classify_lookup_transport(error),
            )
        return outcome

    @activity.defn(name=COMPENSATE)
    async def compensate(self, call: BusinessCall) -> CompensationOutcome:
        return await _measured(
            COMPENSATE,
            call,
            self._reverse(call),
            "settled_compensations",
            "reversals sent to business systems",
        )

    async def _reverse(self, call: BusinessCall) -> CompensationOutcome:
        handler = self._handler(call)
        if handler is not None:
            outcome = await _heartbeating(code.compensate(handler, self._request(call)))
        else:
            spec = call.kind.compensate
            assert spec is not None, "compensation scheduled for a kind without one"
            outcome = await self._http_call(
                call,
                "compensate",
                lambda response: classify_compensation(spec, response.status_code, _json(response)),
                lambda _, error: classify_compensation_transport(error),
            )
        return outcome

    def all(self) -> list[Any]:
        return [self.dispatch, self.lookup, self.compensate]
