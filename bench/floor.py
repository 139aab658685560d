"""Temporal's own floor for the same durable step, measured in the same run on the same server.

Nothing of settled runs here: a trivial workflow whose only step is the business POST, started eagerly
(`request_eager_start`) by a worker that shares the bench's client, unsandboxed, and waited for. Two
floors, one per kind of service:

- a service that deduplicates: the POST runs as a local activity inside the first workflow task, so
  the whole action is one durable step (a retried task repeats the POST with the same key);
- a service that does not: "a request may be on its way" must be durable before the POST leaves, so
  the POST is a regular activity (its scheduling is recorded first): two durable steps at least.

What settled costs is then read as a ratio to these, not only to the bare call.
"""

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

TASK_QUEUE = "settled-bench-floor"
TIMEOUT = timedelta(seconds=10)


class FloorCall(BaseModel):
    url: str
    body: dict[str, Any]
    key: str | None  # the Idempotency-Key, for a service that deduplicates


class FloorActivities:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    @activity.defn(name="bench_floor_post")
    async def post(self, call: FloorCall) -> int:
        headers = {"Idempotency-Key": call.key} if call.key else {}
        response = await self._http.post(call.url, json=call.body, headers=headers)
        return response.status_code


@workflow.defn(name="BenchFloor", sandboxed=False)
class FloorWorkflow:
    @workflow.run
    async def run(self, call: FloorCall) -> int:
        if call.key is not None:  # the service deduplicates: one durable step, the POST inside it
            return await workflow.execute_local_activity_method(
                FloorActivities.post, call, start_to_close_timeout=TIMEOUT
            )
        # It does not: the activity's scheduling is recorded before the POST leaves.
        return await workflow.execute_activity_method(
            FloorActivities.post, call, start_to_close_timeout=TIMEOUT
        )


@dataclass
class Floor:
    """Starts floor actions and waits for them, on a worker that shares its client (eager start)."""

    client: Client
    sandbox_url: str
    tag: str
    counter: int = 0
    ids: list[str] = field(default_factory=list)  # every workflow it started, oldest first

    async def action(self, deduplicated: bool) -> float:
        """One floor action; its latency in ms, start to result."""
        self.counter += 1
        key = f"floor-{self.tag}-{self.counter}"
        self.ids.append(key)
        service = "bookings" if deduplicated else "refunds"
        body = (
            {"room": "Ada", "day": "Thursday"}
            if deduplicated
            else {"order_id": key, "amount": 1, "currency": "EUR"}
        )
        call = FloorCall(
            url=f"{self.sandbox_url}/{service}",
            body={**body, "client_reference": key},
            key=key if deduplicated else None,
        )
        started = time.perf_counter()
        handle = await self.client.start_workflow(
            FloorWorkflow.run, call, id=key, task_queue=TASK_QUEUE, request_eager_start=True
        )
        status = await handle.result()
        elapsed = (time.perf_counter() - started) * 1000
        if status != 201:
            raise RuntimeError(f"floor action {key}: the service answered {status}")
        return elapsed


@asynccontextmanager
async def floor_worker(temporal_address: str, sandbox_url: str) -> AsyncIterator[Floor]:
    client = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=10, limits=limits) as http:
        activities = FloorActivities(http)
        worker = Worker(
            client,
            task_queue=TASK_QUEUE,
            workflows=[FloorWorkflow],
            activities=[activities.post],
        )
        async with worker:
            yield Floor(client, sandbox_url, uuid.uuid4().hex[:8])
