"""`settled worker`: polls the task queue until SIGINT/SIGTERM, then drains and exits."""

import asyncio
import logging
import signal
import sys
from datetime import timedelta

import httpx
from settled.activities.business import BusinessActivities
from settled.workflows.action import ActionWorkflow
from settled.workflows.conversation import ConversationWorkflow
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from settled.config import Settings
from settled.gateway import connect
from settled.identity import TASK_QUEUE
from settled.logs import configure as configure_logs

log = logging.getLogger("settled.worker")
WORKFLOWS = [ActionWorkflow, ConversationWorkflow]
# Pure modules shared with the API: loaded once, not re-imported per workflow run.
PASSED_THROUGH = (
    "settled",
    "settled.workflows.messages",
    "settled.activities.inputs",
    "pydantic",
    "pydantic_core",
    "jsonschema",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )


def build_worker(client: Client, http: httpx.AsyncClient, cached_workflows: int = 500) -> Worker:
    return Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=WORKFLOWS,
        activities=BusinessActivities(http).all(),
        workflow_runner=workflow_runner(),
        max_concurrent_activities=200,
        max_cached_workflows=cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=5),
    )


def _runtime(settings: Settings) -> Runtime | None:
    """The SDK's own Prometheus exporter, which also carries settled's workflow and activity metrics."""
    if settings.worker_metrics_port is None:
        return None
    address = f"127.0.0.1:{settings.worker_metrics_port}"
    return Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address, counters_total_suffix=True))
    )


async def run(settings: Settings) -> None:
    client = await connect(settings, _runtime(settings))
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(limits=limits) as http:
        worker = build_worker(client, http, settings.worker_cached_workflows)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            log.info("worker polling task queue %s at %s", TASK_QUEUE, settings.temporal_address)
            print(f"settled worker: polling {TASK_QUEUE!r} at {settings.temporal_address}", flush=True)
            await stop.wait()


def main() -> None:
    # The workflow sandbox imports the workflow modules anew for every workflow it starts: from
    # bytecode, not from source, even where PYTHONDONTWRITEBYTECODE is set (docs/performance.md).
    sys.dont_write_bytecode = False
    configure_logs("worker")
    asyncio.run(run(Settings.from_env()))


if __name__ == "__main__":
    main()
