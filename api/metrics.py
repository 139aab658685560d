"""Prometheus metrics of the API (requests, latency) at /metrics, and a structured log line per request."""

import logging
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from settled.api.strict import PATH_IDS, is_identifier
from settled.workflows import meters
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.runtime import BUFFERED_METRIC_KIND_COUNTER, BUFFERED_METRIC_KIND_GAUGE, MetricBuffer

log = logging.getLogger("settled.api.requests")
router = APIRouter(tags=["metrics"])


class ApiMetrics:
    def __init__(self) -> None:
        # No `…_created` gauge beside every counter and histogram: a series each that no rule reads.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "settled_api_requests", "API requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "settled_api_request_seconds",
            "API request latency",
            ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )


class HostedWorkerCounters:
    """The metrics of the worker the API hosts, which runs new actions' first tasks (and, under
    `settled dev`, most of every action): settled's own (`settled_*`: transitions, sends, lookups)
    and the SDK's (`temporal_*`: tasks, polls, latencies), as a `settled worker` process publishes
    them. The SDK buffers them; they are moved into the API's registry at each scrape and every few
    seconds (a full buffer would drop updates)."""

    DRAIN_EVERY_S = 5.0
    # The SDK reports durations in milliseconds; its own exporter's buckets, in those units.
    HISTOGRAM_BUCKETS_MS = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 60000)

    def __init__(self, registry: CollectorRegistry) -> None:
        self.buffer = MetricBuffer(buffer_size=100_000)
        self._registry = registry
        # Each series' Prometheus metric and the label names it was first seen with.
        self._series: dict[str, tuple[Counter | Gauge | Histogram, list[str]]] = {}

    def _metric(self, name: str, kind: int, description: str, labels: list[str]) -> tuple[Any, list[str]]:
        known = self._series.get(name)
        if known is None:
            if kind == BUFFERED_METRIC_KIND_COUNTER:
                made: Any = Counter(name, description, labels, registry=self._registry)
            elif kind == BUFFERED_METRIC_KIND_GAUGE:
                made = Gauge(name, description, labels, registry=self._registry)
            else:
                # settled's own histograms are in seconds; the SDK's, in milliseconds.
                seconds = name == meters.OUTCOME_SECONDS
                buckets = meters.OUTCOME_BUCKETS_S if seconds else self.HISTOGRAM_BUCKETS_MS
                made = Histogram(name, description, labels, buckets=buckets, registry=self._registry)
            known = self._series[name] = (made, labels)
        return known

    def drain(self) -> None:
        for update in self.buffer.retrieve_updates():
            metric = update.metric
            names = sorted(update.attributes)
            series, labels = self._metric(metric.name, metric.kind, metric.description or metric.name, names)
            # A later update with other attributes keeps the first labels (Prometheus needs one set).
            values = {name: str(update.attributes.get(name, "")) for name in labels}
            child = series.labels(**values) if labels else series
            if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
                child.inc(update.value)
            elif metric.kind == BUFFERED_METRIC_KIND_GAUGE:
                child.set(update.value)
            else:
                child.observe(update.value)


class MeasureRequests:
    """Counts and times every request by its route template (never by raw path: ids would explode it)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(elapsed)
            # Only well-formed ids: a refused one may be anything a caller put in the path.
            ids = {
                k: v
                for k, v in scope.get("path_params", {}).items()
                if k in PATH_IDS and isinstance(v, str) and is_identifier(v)
            }
            log.info(
                "%s %s %s", scope["method"], route, status, extra={**ids, "ms": round(elapsed * 1000, 1)}
            )


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    request.app.state.worker_counters.drain()
    request.app.state.fleet.refresh(request.app.state.gateways.get)
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
