"""`settled worker`: polls the task queue until SIGINT/SIGTERM, then drains and exits."""

import asyncio
import logging
import signal
import sys
from typing import Any

import httpx
from settled.workflows.hosting import build_worker
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from settled.config import Settings
from settled.gateway import connect
from settled.identity import TASK_QUEUE
from settled.logs import configure as configure_logs

log = logging.getLogger("settled.worker")


def _runtime(settings: Settings) -> Runtime | None:
    """The SDK's own Prometheus exporter, which also carries settled's workflow and activity metrics."""
    if settings.worker_metrics_port is None:
        return None
    address = f"127.0.0.1:{settings.worker_metrics_port}"
    return Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address, counters_total_suffix=True))
    )


async def run(settings: Settings, handlers: dict[str, Any]) -> None:
    client = await connect(settings, _runtime(settings))
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(limits=limits) as http:
        worker = build_worker(client, http, handlers, cached_workflows=settings.worker_cached_workflows)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            log.info("worker polling task queue %s at %s", TASK_QUEUE, settings.temporal_address)
            print(f"settled worker: polling {TASK_QUEUE!r} at {settings.temporal_address}", flush=True)
            await stop.wait()


def main(settings: Settings, handlers: dict[str, Any]) -> None:
    # The workflow sandbox imports the workflow modules anew for every workflow it starts: from
    # bytecode, not from source, even where PYTHONDONTWRITEBYTECODE is set (docs/performance.md).
    sys.dont_write_bytecode = False
    configure_logs("worker")
    asyncio.run(run(settings, handlers))
