"""What an action costs on Temporal Cloud, which bills per Action: counted from the recorded histories,
per Temporal's published list, plus the queries the API sends (a query a worker answers is an Action,
and leaves no trace in any history).

From a history: a workflow started (by a start, a signal-with-start, update-with-start, continue-as-new),
each signal, each update accepted, each timer started, each search-attribute upsert (not the attributes
given at start, nor `TemporalChangeVersion` alone), each activity attempt, each local activity.
From the dev server's own metrics (`--metrics-port`): the queries it handed to a worker.
"""

import asyncio
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpx
from settled.gateway.runs import every_run
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

_BILLED_ONCE = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "workflow started",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
}
UPSERT = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
ACTIVITY_STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
MARKER = EventType.EVENT_TYPE_MARKER_RECORDED
LOCAL_ACTIVITY_MARKER = "core_local_activity"
VERSION_ATTRIBUTE = "TemporalChangeVersion"
KINDS = ("workflow started", "signal", "update", "timer", "search-attribute upsert", "activity",
         "local activity", "query")  # fmt: skip


@dataclass
class Billed:
    """Actions by kind, over some workflows' histories (and queries)."""

    counts: dict[str, int]

    @classmethod
    def none(cls) -> "Billed":
        return cls(dict.fromkeys(KINDS, 0))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, other: "Billed") -> None:
        for kind, count in other.counts.items():
            self.counts[kind] += count

    def minus(self, earlier: "Billed") -> "Billed":
        return Billed({kind: count - earlier.counts[kind] for kind, count in self.counts.items()})

    def per(self, n: int) -> dict[str, float]:
        shown = {kind: round(count / max(1, n), 2) for kind, count in self.counts.items() if count}
        return {"total": round(self.total / max(1, n), 2), **shown}


async def billed_in_history(client: Client, workflow_id: str) -> Billed:
    """One workflow's Actions so far, over every run it has had (continued as new, or opened again by
    a late control: `settled.gateway.runs`); none for a workflow never started."""
    try:
        runs = await every_run(client, workflow_id)
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            return Billed.none()
        raise
    return billed_in_events(event for history in runs for event in history.events)


def billed_in_events(events: Iterable[HistoryEvent]) -> Billed:
    """The Actions some history events record (of one run or several)."""
    billed = Billed.none()
    for event in events:
        kind = _BILLED_ONCE.get(event.event_type)
        if kind is not None:
            billed.counts[kind] += 1
        elif event.event_type == ACTIVITY_STARTED:
            billed.counts["activity"] += event.activity_task_started_event_attributes.attempt - 1  # retries
        elif event.event_type == UPSERT:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            billed.counts["search-attribute upsert"] += set(fields) != {VERSION_ATTRIBUTE}
        elif event.event_type == MARKER:
            marker = event.marker_recorded_event_attributes.marker_name
            billed.counts["local activity"] += marker == LOCAL_ACTIVITY_MARKER
    return billed


async def billed_in_histories(client: Client, workflow_ids: list[str]) -> Billed:
    total = Billed.none()
    for workflow_id in dict.fromkeys(workflow_ids):
        total.add(await billed_in_history(client, workflow_id))
    return total


_QUERIES = re.compile(
    r'^service_requests\{[^}]*operation="QueryWorkflow"[^}]*service_name="frontend"[^}]*\} (\S+)$', re.M
)
_DESCRIBES = re.compile(
    r'^service_requests\{[^}]*operation="DescribeNamespace"[^}]*service_name="frontend"[^}]*\} (\S+)$', re.M
)


def _sum(pattern: "re.Pattern[str]", text: str) -> int:
    return int(sum(float(value) for value in pattern.findall(text)))


async def queries_so_far(client: Client, metrics_url: str, timeout_s: float = 30) -> int:
    """How many queries the dev server has taken so far. Its metrics are flushed about once a second:
    a namespace description sent now (which nothing else sends) shows once a flush after it came, and
    with it every query sent before."""
    async with httpx.AsyncClient(timeout=5) as http:
        before = _sum(_DESCRIBES, (await http.get(metrics_url)).text)
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = (await http.get(metrics_url)).text
            if _sum(_DESCRIBES, text) > before:
                return _sum(_QUERIES, text)
            await asyncio.sleep(0.1)  # polling the metrics until the flush shows, with a deadline
    raise RuntimeError(f"the dev server's metrics at {metrics_url} did not show a flush in {timeout_s:g}s")
