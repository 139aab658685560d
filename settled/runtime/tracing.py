"""Traces (OpenTelemetry), off unless OpenTelemetry's own variables ask for them (docs/tracing.md).

Tracing is on in a process when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`), or,
without it, when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` turns it off whatever else is set. The SDK reads the rest itself
(`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, the OTLP
exporter's headers and timeouts). Off, nothing here is installed: no interceptor, no middleware, no
span, no header.

What a span may hold is decided here and nowhere else: ids, kinds, attempts, verdicts, status codes.
Never params, a secret, a sentence, a query string or a caller's address.
"""

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.client import Interceptor

from settled.domain.models import ActionStatus

TRACER_NAME = "settled"
_ON = "true"
_state: dict[str, bool] = {}
# Only the trace context goes to a business service: baggage from upstream may hold anything.
_TO_SERVICES = TraceContextTextMapPropagator()


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether OpenTelemetry's variables ask this process for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == _ON:
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return any(environ.get(name) for name in endpoints)


def start(service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install this process's tracer provider and exporter if the variables ask for traces; once per
    process. `service_name` stands in when `OTEL_SERVICE_NAME` is unset. Returns whether tracing is on."""
    if "on" in _state:
        return _state["on"]
    _state["on"] = on = wanted(environ)
    if on:
        _install(service_name, environ)
    return on


def on() -> bool:
    return _state.get("on", False)


def _install(service_name: str, environ: Mapping[str, str]) -> None:
    # Imported only when on: a process that does not trace never loads the SDK.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    attributes = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(attributes))  # the sampler from OTEL_TRACES_SAMPLER
    names = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    for name in names:
        exporter: SpanExporter
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()  # endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* variables
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER: {name!r} is not one settled ships (otlp, console)")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


def client_interceptors() -> list[Interceptor]:
    """Temporal's tracing interceptor, on the client and so on every worker built on it: spans for
    each start, update and signal, for the workflow's handling of them, and for each activity, the
    trace carried in Temporal's headers (a lookup an hour later belongs to the action's trace)."""
    if not on():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(trace.get_tracer(TRACER_NAME))]


def instrument_api(app: Any) -> None:
    """A span per route, its parent the `traceparent` the request carried."""
    if not on():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        server_request_hook=_without_caller_details,
        excluded_urls="/healthz,/metrics",
        exclude_spans=["receive", "send"],  # one span per route, not one per ASGI message
    )


# What the HTTP instrumentation records by default that may be personal or secret: a query string
# (a page link's token), the caller's address and user agent. Set again to what is safe to keep.
_URL_KEYS = ("http.url", "url.full")
_TARGET_KEYS = ("http.target",)
_DROPPED_KEYS = ("url.query", "net.peer.ip", "client.address", "net.sock.peer.addr", "http.client_ip")
_DROPPED_KEYS += ("net.peer.port", "client.port", "http.user_agent", "user_agent.original")
NOT_RECORDED = "(not recorded)"


def _without_caller_details(span: Span, scope: dict[str, Any]) -> None:
    present = getattr(span, "attributes", None) or {}  # the SDK's span shows what it holds
    path = scope.get("path", "")
    for key in present.keys() & {*_URL_KEYS, *_TARGET_KEYS}:
        span.set_attribute(key, path)
    for key in present.keys() & set(_DROPPED_KEYS):
        span.set_attribute(key, NOT_RECORDED)


@contextmanager
def business_call(
    call: str, operation_id: str, kind: str, attempt: int, handler: bool
) -> Iterator[Span | None]:
    """The span of one request to a business service (or one call of a code kind's handler); None
    when tracing is off. The caller adds what came back (`outcome`, `status_code`)."""
    if not on():
        yield None
        return
    attributes = {
        "settled.call": call,
        "settled.operation_id": operation_id,
        "settled.kind": kind,
        "settled.attempt": attempt,
        "settled.code_kind": handler,
    }
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(
        f"settled.{call} {kind}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def outcome(span: Span | None, result: str) -> None:
    """What the business service's answer meant (`settled.outcome`: confirmed, unknown, applied …)."""
    if span is not None:
        span.set_attribute("settled.outcome", result)


def status_code(code: int) -> None:
    """The HTTP status the business service answered, on the current call's span."""
    if on():
        trace.get_current_span().set_attribute("http.response.status_code", code)


def answered(status: ActionStatus) -> ActionStatus:
    """`status`, noted on the current span (a route's): the action it answered of and the state it
    reached. Ids, the kind and the state only: never params, reasons or sentences."""
    if on():
        trace.get_current_span().set_attributes(
            {
                "settled.operation_id": status.operation_id,
                "settled.kind": status.kind,
                "settled.state": status.state.value,
            }
        )
    return status


def carry(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current trace's `traceparent` (so the service's own logs join the trace);
    unchanged when tracing is off or the request sets its own."""
    if on() and not any(name.lower() == "traceparent" for name in headers):
        headers = dict(headers)
        _TO_SERVICES.inject(headers)
    return headers
