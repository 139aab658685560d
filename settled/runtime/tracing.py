"""Traces (OpenTelemetry), off unless OpenTelemetry's own variables ask for them (docs/tracing.md).

Tracing is on in a process when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`), or,
without it, when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
`OTEL_SDK_DISABLED=true` turns it off whatever else is set. OTLP goes over `http/protobuf` (the
default) or `grpc`, as `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL` says; an
exporter or protocol settled does not ship is refused at start-up (`problem`), in one line. The SDK
reads the rest itself (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
`OTEL_BSP_*`, the OTLP exporter's headers and timeouts). Off, nothing here is installed: no
interceptor, no middleware, no span, no header.

Spans follow OpenTelemetry's stable HTTP semantic conventions: the API's server spans
(`http.request.method`, `url.path`, `url.scheme`, `http.route`, `http.response.status_code`,
`client.address`) and the business calls' client spans (`http.request.method`, `server.address`,
`server.port`, `url.full` without its query, `http.response.status_code`); no deprecated name.

What a span may hold is decided here and nowhere else: ids, kinds, attempts, verdicts, status codes,
where a request went. Never params, a secret, a sentence or a query string.
"""

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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


EXPORTERS = ("otlp", "console", "none")
PROTOCOLS = ("http/protobuf", "grpc")


def _exporters(environ: Mapping[str, str]) -> list[str]:
    return [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]


def _protocol(environ: Mapping[str, str]) -> tuple[str, str]:
    """The OTLP protocol for traces and the variable that set it."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        if environ.get(name, "").strip():
            return environ[name].strip().lower(), name
    return "http/protobuf", ""


def problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why OpenTelemetry's variables cannot be honoured (an exporter or protocol settled does not
    ship), in one line; None when they can, or when tracing is off."""
    if not wanted(environ):
        return None
    for name in _exporters(environ):
        if name not in EXPORTERS:
            return (
                f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER'].strip()}: settled ships the "
                f"exporters {', '.join(EXPORTERS)}, not {name!r}"
            )
    protocol, variable = _protocol(environ)
    if "otlp" in _exporters(environ) and protocol not in PROTOCOLS:
        return f"{variable}={protocol}: settled's OTLP exporter speaks {' or '.join(PROTOCOLS)}"
    return None


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
    for name in _exporters(environ):  # checked at start-up (`problem`): each is one settled ships
        exporter: SpanExporter
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name == "otlp" and _protocol(environ)[0] == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as OverGrpc

            exporter = OverGrpc()  # endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* variables
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            continue
        provider.add_span_processor(_exported_without_secrets(BatchSpanProcessor(exporter)))
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
    """A span per route, its parent the `traceparent` the request carried, with the stable HTTP
    attribute names only (the instrumentation's opt-in, asked for before it first reads it)."""
    if not on():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    opted = [item.strip() for item in os.environ.get(SEMCONV_OPT_IN, "").split(",") if item.strip()]
    os.environ[SEMCONV_OPT_IN] = ",".join([item for item in opted if not item.startswith("http")] + ["http"])
    FastAPIInstrumentor.instrument_app(
        app,
        excluded_urls="/healthz,/metrics",
        exclude_spans=["receive", "send"],  # one span per route, not one per ASGI message
    )


SEMCONV_OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
# What the HTTP instrumentation records that may be secret or personal: the query string (a page
# link's token), the caller's user agent and port. It records them unconditionally and takes no list
# of what to leave out, so each server span is exported without them.
_LEFT_OUT = ("url.query", "user_agent.original", "client.port")


def _exported_without_secrets(exporting: Any) -> Any:
    """A span processor that hands `exporting` each span, a server span without `_LEFT_OUT`."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    class WithoutSecrets(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            attributes = dict(span.attributes or {})
            if span.kind is trace.SpanKind.SERVER and attributes.keys() & set(_LEFT_OUT):
                for key in _LEFT_OUT:
                    attributes.pop(key, None)
                span = ReadableSpan(
                    name=span.name, context=span.context, parent=span.parent, resource=span.resource,
                    attributes=attributes, events=span.events, links=span.links, kind=span.kind,
                    status=span.status, start_time=span.start_time, end_time=span.end_time,
                    instrumentation_scope=span.instrumentation_scope,
                )  # fmt: skip
            exporting.on_end(span)

        def shutdown(self) -> None:
            exporting.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(exporting.force_flush(timeout_millis))

    return WithoutSecrets()


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


def request(method: str, url: str, secrets: Sequence[str]) -> None:
    """Where the current business call's request goes, by the stable HTTP client conventions: the
    method, the service's host and port, and the URL without its query, credentials or any secret."""
    if not on():
        return
    parts = urlsplit(url)
    host_port = parts.netloc.rpartition("@")[2]  # without user:password
    full = urlunsplit((parts.scheme, host_port, parts.path, "", ""))
    for secret in secrets:
        full = full.replace(secret, "REDACTED")
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    attributes: dict[str, str | int] = {"http.request.method": method.upper(), "url.full": full}
    if parts.hostname:
        attributes["server.address"] = parts.hostname
    if port is not None:
        attributes["server.port"] = port
    trace.get_current_span().set_attributes(attributes)


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
