"""Prometheus metrics of the API (requests, latency) at /metrics, and a structured log line per request."""

import logging
import time

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from settled.api.strict import PATH_IDS, is_identifier
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.runtime import BUFFERED_METRIC_KIND_COUNTER, BUFFERED_METRIC_KIND_GAUGE, MetricBuffer

log = logging.getLogger("settled.api.requests")
router = APIRouter(tags=["metrics"])


class ApiMetrics:
    def __init__(self) -> None:
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
    """settled's own counters (`settled_*`: transitions, sends, lookups) counted by the worker the API
    hosts, which runs new actions' first tasks: the SDK buffers them, and they are moved into the
    API's registry at each scrape and every few seconds (a full buffer would drop updates)."""

    DRAIN_EVERY_S = 5.0

    def __init__(self, registry: CollectorRegistry) -> None:
        self.buffer = MetricBuffer(buffer_size=100_000)
        self._registry = registry
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}

    def drain(self) -> None:
        for update in self.buffer.retrieve_updates():
            metric = update.metric
            if not metric.name.startswith("settled_"):
                continue  # the SDK's own series stay with the `settled worker` processes' exporter
            names = sorted(update.attributes)
            if metric.kind == BUFFERED_METRIC_KIND_GAUGE:  # settled_shared_lane_in_flight{kind}
                gauge = self._gauges.get(metric.name)
                if gauge is None:
                    description = metric.description or metric.name
                    gauge = Gauge(metric.name, description, names, registry=self._registry)
                    self._gauges[metric.name] = gauge
                gauge.labels(**{name: str(update.attributes[name]) for name in names}).set(update.value)
                continue
            if metric.kind != BUFFERED_METRIC_KIND_COUNTER:
                continue
            counter = self._counters.get(metric.name)
            if counter is None:
                counter = Counter(
                    metric.name, metric.description or metric.name, names, registry=self._registry
                )
                self._counters[metric.name] = counter
            counter.labels(**{name: str(update.attributes[name]) for name in names}).inc(update.value)


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
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
