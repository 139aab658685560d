"""Dependencies: the gateway of the app (connected lazily, so the API starts before Temporal does),
and who calls (an API key, or a token for one conversation: api.access)."""

import asyncio
import logging
from typing import Annotated, Any

import httpx
from fastapi import Depends, Request
from settled.api.access import Caller, caller, tenant
from settled.api.metrics import HostedWorkerCounters
from settled.gateway.gateway import Gateway, connect
from settled.workflows.hosting import build_worker
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Worker

from settled.domain.kinds import Kinds
from settled.runtime.config import Settings

log = logging.getLogger("settled.api")


class GatewayHolder:
    """The app's one gateway, and the worker the API hosts on the gateway's client (eager starts)."""

    def __init__(
        self, settings: Settings, kinds: Kinds, counters: HostedWorkerCounters, handlers: dict[str, Any]
    ) -> None:
        self.settings = settings
        self.kinds = kinds
        self.handlers = handlers
        self.counters = counters
        self._gateway: Gateway | None = None
        self._lock = asyncio.Lock()
        self._worker: Worker | None = None
        self._worker_run: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        self._draining: asyncio.Task[None] | None = None

    async def get(self) -> Gateway:
        if self._gateway is None:
            async with self._lock:
                if self._gateway is None:
                    if self.settings.api_worker:
                        runtime = Runtime(telemetry=TelemetryConfig(metrics=self.counters.buffer))
                        client = await connect(self.settings, runtime)
                        self._host_worker(client)
                    else:
                        client = await connect(self.settings)
                    self._gateway = Gateway(client, self.kinds, self.settings, eager=self.settings.api_worker)
        return self._gateway

    def _host_worker(self, client: Client) -> None:
        # Eager start needs a worker on the very client that starts the workflow.
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        self._http = httpx.AsyncClient(limits=limits)
        self._worker = build_worker(
            client, self._http, self.handlers, cached_workflows=self.settings.worker_cached_workflows
        )
        self._worker_run = asyncio.create_task(self._worker.run())
        self._worker_run.add_done_callback(_report_worker_end)
        self._draining = asyncio.create_task(self._drain_counters())

    async def _drain_counters(self) -> None:
        while True:
            await asyncio.sleep(self.counters.DRAIN_EVERY_S)
            self.counters.drain()

    async def close(self) -> None:
        """Drain the hosted worker (its tasks in flight finish or are handed back), then its client."""
        if self._worker is not None and self._worker_run is not None and not self._worker_run.done():
            await self._worker.shutdown()
        if self._draining is not None:
            self._draining.cancel()
        if self._http is not None:
            await self._http.aclose()


def _report_worker_end(run: "asyncio.Task[None]") -> None:
    if not run.cancelled() and run.exception() is not None:
        log.error("the API's worker stopped: %s", run.exception())


async def get_gateway(request: Request) -> Gateway:
    holder: GatewayHolder = request.app.state.gateways
    return await holder.get()


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
TenantDep = Annotated[str | None, Depends(tenant)]
CallerDep = Annotated[Caller, Depends(caller)]
