"""The series only Temporal knows, read when /metrics is scraped (docs/operations.md).

No process holds the open actions: each lives in its workflow. So the API counts them in Temporal's
visibility (the search attributes every action keeps: kind, tenant, state, needs attention), and asks
the server who polls each task queue and how many tasks wait there. Each kind's outcome objective
comes from the kinds file. The labels are bounded by the kinds file and `SETTLED_API_KEYS` (kinds,
tenants, six states, task queues), never by an action.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from settled.domain.kinds import Kinds
from settled.domain.states import State
from settled.temporal import visibility
from settled.temporal.identity import TASK_QUEUE, kind_task_queue

log = logging.getLogger("settled.api.fleet")

# A poller is counted while the server saw it poll within this long: an idle worker's long poll
# lasts about a minute before it polls again.
POLLER_RECENT_S = 120.0
QUEUE_TYPES = {
    "workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
}


class FleetSeries:
    """Gauges read again at most every REFRESH_EVERY_S, in the background of a scrape; cleared when
    Temporal cannot be read, so a stale count never stands for a current one."""

    REFRESH_EVERY_S = 5.0
    TIMEOUT_S = 8.0
    CONCURRENT_READS = 8

    def __init__(
        self, registry: CollectorRegistry, kinds: Kinds, tenants: Iterable[str], namespace: str
    ) -> None:
        self._kinds = kinds.names()
        self._tenants = sorted(set(tenants)) or [visibility.NO_TENANT]
        self._namespace = namespace
        self._queues = [(TASK_QUEUE, "workflow"), (TASK_QUEUE, "activity")] + [
            (kind_task_queue(kind), "activity") for kind in self._kinds
        ]
        self._refreshed_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None
        self.open_actions = Gauge(
            "settled_open_actions", "open actions by kind and state", ["kind", "state"], registry=registry
        )
        self.needing_attention = Gauge(
            "settled_actions_needing_attention",
            "open actions not settled attention_after_s after their first send",
            ["kind", "tenant"],
            registry=registry,
        )
        self.pollers = Gauge(
            "settled_task_queue_pollers",
            f"workers that polled the task queue in the last {POLLER_RECENT_S:g} s",
            ["task_queue", "task_queue_type"],
            registry=registry,
        )
        self.backlog = Gauge(
            "settled_task_queue_backlog_tasks",
            "tasks waiting in the task queue for a worker (approximate)",
            ["task_queue", "task_queue_type"],
            registry=registry,
        )
        self.backlog_age = Gauge(
            "settled_task_queue_backlog_age_seconds",
            "how long the oldest waiting task of the task queue has waited (approximate)",
            ["task_queue", "task_queue_type"],
            registry=registry,
        )
        objective = Gauge(
            "settled_kind_outcome_objective_seconds",
            "the kind's outcome_objective_s: how soon after its request an action should be verified",
            ["kind"],
            registry=registry,
        )
        for name in self._kinds:
            spec = kinds.get(name)
            if spec is not None and spec.outcome_objective_s is not None:
                objective.labels(name).set(spec.outcome_objective_s)
        self._gauges = (
            self.open_actions,
            self.needing_attention,
            self.pollers,
            self.backlog,
            self.backlog_age,
        )

    def refresh(self, gateway: Callable[[], Awaitable[Any]]) -> None:
        """Start reading Temporal again (through the app's gateway, connected on first use) unless the
        last read is recent or one is under way. The scrape never waits for it: it is served the last
        values, so a slow Temporal never makes the scrape itself time out."""
        if self._reading is not None or time.monotonic() - self._refreshed_at < self.REFRESH_EVERY_S:
            return
        self._reading = asyncio.create_task(self._refresh(gateway))

    async def _refresh(self, gateway: Callable[[], Awaitable[Any]]) -> None:
        try:
            client = (await asyncio.wait_for(gateway(), self.TIMEOUT_S)).client
            await asyncio.wait_for(self._read(client), self.TIMEOUT_S)
        except Exception as error:  # any failure to read: no values rather than stale ones
            log.warning("could not read the actions and task queues from Temporal: %s", type(error).__name__)
            for gauge in self._gauges:
                gauge.clear()
        finally:
            self._refreshed_at = time.monotonic()
            self._reading = None

    async def _read(self, client: Client) -> None:
        reads = asyncio.Semaphore(self.CONCURRENT_READS)

        async def limited(work: Awaitable[int]) -> int:
            async with reads:
                return await work

        states = [(kind, state) for kind in self._kinds for state in State]
        attention = [(kind, tenant) for kind in self._kinds for tenant in self._tenants]
        flagged = f"{visibility.NEEDS_ATTENTION.name} = true"
        clauses = [
            (kind, f"{visibility.STATE.name} = {visibility.quoted(state.value)}") for kind, state in states
        ] + [
            (kind, f"{visibility.TENANT.name} = {visibility.quoted(tenant)} AND {flagged}")
            for kind, tenant in attention
        ]
        counts = await asyncio.gather(
            *(limited(self._count(client, kind, clause)) for kind, clause in clauses)
        )
        queues = await asyncio.gather(*(self._describe(client, queue, kind) for queue, kind in self._queues))
        for (kind, state), count in zip(states, counts[: len(states)], strict=True):
            self.open_actions.labels(kind, state.value).set(count)
        for (kind, tenant), count in zip(attention, counts[len(states) :], strict=True):
            self.needing_attention.labels(kind, tenant).set(count)
        for (queue, queue_type), (pollers, backlog, age) in zip(self._queues, queues, strict=True):
            self.pollers.labels(queue, queue_type).set(pollers)
            self.backlog.labels(queue, queue_type).set(backlog)
            self.backlog_age.labels(queue, queue_type).set(age)

    async def _count(self, client: Client, kind: str, clause: str) -> int:
        query = (
            f"WorkflowType = 'Action' AND ExecutionStatus = 'Running' "
            f"AND {visibility.KIND.name} = {visibility.quoted(kind)} AND {clause}"
        )
        return (await client.count_workflows(query)).count

    async def _describe(self, client: Client, queue: str, queue_type: str) -> tuple[int, int, float]:
        """Recent pollers, backlog and the backlog's age of one task queue of one type."""
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=self._namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=QUEUE_TYPES[queue_type],
                report_stats=True,
            )
        )
        now = datetime.now(UTC)
        recent = sum(
            1
            for poller in answer.pollers
            if (now - poller.last_access_time.ToDatetime(UTC)).total_seconds() <= POLLER_RECENT_S
        )
        stats = answer.stats
        return (
            recent,
            stats.approximate_backlog_count,
            stats.approximate_backlog_age.ToTimedelta().total_seconds(),
        )
