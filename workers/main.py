"""`settled worker`: polls its task queues until SIGINT/SIGTERM, then drains and exits.

It serves the shared queue (`settled`: every workflow task, and each kind's business calls up to its
share) and each kind's own queue (its calls beyond that, settled.activities.lanes); `--kinds a,b`
serves only those kinds' queues (and runs only their calls on its shared worker), `--no-workflows`
leaves the shared queue to others.
"""

import asyncio
import logging
import signal
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx
from settled.gateway.preflight import ready
from settled.workflows import meters
from settled.workflows.hosting import build_worker, kind_workers
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from settled.domain.kinds import KindSpec
from settled.runtime import tracing
from settled.runtime.config import Settings
from settled.runtime.logs import configure as configure_logs
from settled.temporal.identity import TASK_QUEUE, kind_task_queue

log = logging.getLogger("settled.worker")


def _runtime(settings: Settings) -> Runtime | None:
    """The SDK's own Prometheus exporter, which also carries settled's workflow and activity metrics."""
    if settings.worker_metrics_port is None:
        return None
    host = settings.worker_metrics_host
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed before its port
    address = f"{host}:{settings.worker_metrics_port}"
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(
                bind_address=address,
                counters_total_suffix=True,
                histogram_bucket_overrides={meters.OUTCOME_SECONDS: meters.OUTCOME_BUCKETS_S},
            )
        )
    )


async def run(
    settings: Settings, kinds: list[KindSpec], handlers: dict[str, Any], workflows: bool = True
) -> None:
    """Serve the kinds' queues, and the workflow queue unless `workflows` is False. `handlers`: the
    imported handler of each code kind served (settled.business.startup.prepare)."""
    client, notes = await ready(settings, _runtime(settings))
    assert client is not None  # a worker never serves unchecked
    for note in notes:
        print(f"settled worker: note: {note}", file=sys.stderr, flush=True)
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(limits=limits))
        workers: list[Worker] = []
        if workflows:
            served = [kind.name for kind in kinds]
            workers.append(
                build_worker(
                    client, http, handlers, cached_workflows=settings.worker_cached_workflows, served=served
                )
            )
        for worker, kind_http in kind_workers(client, kinds, handlers):
            await stack.enter_async_context(kind_http)  # closed after its worker, which exits first
            workers.append(worker)
        for worker in workers:
            await stack.enter_async_context(worker)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        queues = ([TASK_QUEUE] if workflows else []) + [kind_task_queue(kind.name) for kind in kinds]
        log.info("worker polling task queues %s at %s", ", ".join(queues), settings.temporal_address)
        polled = ", ".join(map(repr, queues))
        print(f"settled worker: polling {polled} at {settings.temporal_address}", flush=True)
        await stop.wait()


def main(settings: Settings, kinds: list[KindSpec], handlers: dict[str, Any], workflows: bool = True) -> None:
    # The workflow sandbox imports the workflow modules anew for every workflow it starts: from
    # bytecode, not from source, even where PYTHONDONTWRITEBYTECODE is set (docs/performance.md).
    sys.dont_write_bytecode = False
    configure_logs("worker")
    tracing.start("settled-worker")
    asyncio.run(run(settings, kinds, handlers, workflows))
