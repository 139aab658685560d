"""The three business activities: dispatch, lookup, compensate.

Each makes exactly one HTTP request and returns what the answer means (settled.outcomes); none
raises for a business answer, so Temporal never retries a write on its own. The operation key goes
in the idempotency header, in `operation_field`, and in `{operation_id}` of URL templates.
"""

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from settled.activities.inputs import COMPENSATE, DISPATCH, LOOKUP, BusinessCall
from temporalio import activity

from settled.kinds import HttpCall
from settled.outcomes import (
    CompensationOutcome,
    DispatchOutcome,
    LookupOutcome,
    Transport,
    classify_compensation,
    classify_compensation_transport,
    classify_dispatch,
    classify_dispatch_transport,
    classify_lookup,
    classify_lookup_transport,
)
from settled.templates import render

T = TypeVar("T")
HEARTBEAT_EVERY_S = 0.5


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


def _url(call: BusinessCall, template: str) -> str:
    values: dict[str, Any] = {
        "operation_id": call.operation_key,
        "business_ref": call.business_ref,
        "params": call.params,
    }
    return render(template, values, escape=lambda text: quote(text, safe=""))


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


async def _heartbeating(work: Awaitable[T]) -> T:
    """Heartbeat while the request runs, so a killed worker is noticed in seconds, not at the timeout."""
    task = asyncio.ensure_future(work)
    if activity.info().is_local:  # inside a workflow task: the task's own timeout guards it
        return await task
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
        if done:
            return task.result()
        activity.heartbeat()


def _count(name: str, description: str, call: BusinessCall, result: str) -> None:
    activity.metric_meter().create_counter(name, description).add(
        1, {"kind": call.kind.name, "result": result}
    )


class BusinessActivities:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def _send(self, call: BusinessCall, spec: HttpCall, **kwargs: Any) -> httpx.Response:
        return await _heartbeating(
            self._http.request(spec.method, _url(call, spec.url), timeout=call.kind.timeout_s, **kwargs)
        )

    @activity.defn(name=DISPATCH)
    async def dispatch(self, call: BusinessCall) -> DispatchOutcome:
        kind = call.kind
        body = dict(call.params)
        if kind.operation_field:
            body[kind.operation_field] = call.operation_key
        headers = {kind.idempotency_header: call.operation_key} if kind.idempotency_header else {}
        try:
            response = await self._send(call, kind.dispatch, json=body, headers=headers)
            outcome = classify_dispatch(response.status_code, _json(response), kind.reference_field)
        except httpx.TransportError as error:
            outcome = classify_dispatch_transport(_transport_failure(error), _describe(error))
        _count("settled_dispatches", "write requests sent to business systems", call, outcome.result)
        return outcome

    @activity.defn(name=LOOKUP)
    async def lookup(self, call: BusinessCall) -> LookupOutcome:
        spec = call.kind.lookup
        assert spec is not None, "lookup scheduled for a kind without one"
        try:
            response = await self._send(call, spec)
            outcome = classify_lookup(
                response.status_code, _json(response), call.kind.reference_field, spec.authoritative
            )
        except httpx.TransportError as error:
            outcome = classify_lookup_transport(_describe(error))
        _count("settled_reconciliation_lookups", "lookups sent to business systems", call, outcome.result)
        return outcome

    @activity.defn(name=COMPENSATE)
    async def compensate(self, call: BusinessCall) -> CompensationOutcome:
        spec = call.kind.compensate
        assert spec is not None, "compensation scheduled for a kind without one"
        try:
            response = await self._send(call, spec, json={})
            outcome = classify_compensation(response.status_code, _json(response))
        except httpx.TransportError as error:
            outcome = classify_compensation_transport(_describe(error))
        _count("settled_compensations", "reversals sent to business systems", call, outcome.result)
        return outcome

    def all(self) -> list[Any]:
        return [self.dispatch, self.lookup, self.compensate]
