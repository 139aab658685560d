"""Where one confirmed action's latency goes, in three parts, for settled and for Temporal's floor:
`python -m settled.bench.timeline [N]` (docs/performance/profile.md).

One caller, one action after another, each in a new conversation (settled) or a workflow of its own
(the floor), on one stack of its own. Each action's latency is split by its own history's clock:

- `to_started`: from the caller's send to the start the server recorded (for settled: the HTTP hop
  into the API and its work before the start);
- `started_to_completed`: from that start to the workflow task that confirmed it (the start's commit,
  the worker's task with the business call inside it, and the completion's commit);
- `completed_to_answer`: from that task to the caller holding the answer (for settled: the history's
  long poll, the status and the HTTP answer; for the floor, its `result()`).

The caller, the API and the server share the machine's clock, so the parts add up to the whole. Only
the medians and p95s are reported: percentiles of parts do not add up to percentiles of the whole.
"""

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from settled.bench.cli import probe_count
from settled.bench.floor import floor_worker
from settled.bench.measures import BenchError, Run
from settled.bench.runner import BENCH_KINDS
from settled.bench.stats import summarize
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from settled.client import SettledClient
from settled.domain.states import State
from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id

WARM_UP = 20
PARTS = ("to_started", "started_to_completed", "completed_to_answer", "total")
TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


async def _split(client: Client, workflow_id: str, sent_ms: float, answered_ms: float) -> dict[str, float]:
    """The action's latency in parts, by the times its history recorded its start and its first
    completed workflow task (the one that confirmed it)."""
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    started = events[0].event_time.ToMicroseconds() / 1000
    completed = next(e for e in events if e.event_type == TASK_COMPLETED).event_time.ToMicroseconds() / 1000
    return {
        "to_started": started - sent_ms,
        "started_to_completed": completed - started,
        "completed_to_answer": answered_ms - completed,
        "total": answered_ms - sent_ms,
    }


async def _timeline(n: int, act: Callable[[], Awaitable[str]], client: Client) -> dict[str, Any]:
    """`n` actions after `WARM_UP` uncounted ones, each split by its history."""
    samples: dict[str, list[float]] = {part: [] for part in PARTS}
    for i in range(WARM_UP + n):
        sent = time.time() * 1000
        workflow_id = await act()
        answered = time.time() * 1000
        if i < WARM_UP:
            continue
        for part, value in (await _split(client, workflow_id, sent, answered)).items():
            samples[part].append(value)
    return {
        part: {k: v for k, v in summarize(s).as_dict().items() if k in ("n", "p50", "p95")}
        for part, s in samples.items()
    }


async def measure(stack: Stack, n: int) -> dict[str, Any]:
    client = await Client.connect(stack.temporal_address)
    async with (
        httpx.AsyncClient(base_url=stack.api_url) as api,
        httpx.AsyncClient(base_url=stack.sandbox_url) as sandbox,
        floor_worker(stack.temporal_address, stack.sandbox_url) as floor,
    ):
        run = Run(SettledClient(stack.api_url, timeout_s=60, retries=0, http=api), sandbox)

        async def settled_action() -> str:
            operation_id = run.new_id("timeline")
            status = await run.create(operation_id)
            if status is None or status.state is not State.CONFIRMED:
                raise BenchError(
                    f"{operation_id}: not confirmed ({status.state if status else 'unanswered'})"
                )
            return action_workflow_id(None, operation_id)

        async def floor_action() -> str:
            await floor.action(deduplicated=True)
            return floor.ids[-1]

        return {
            "settled": await _timeline(n, settled_action, client),
            "floor": await _timeline(n, floor_action, client),
        }


def main(argv: list[str] | None = None) -> int:
    n = probe_count(
        argv, "python -m settled.bench.timeline", __doc__, 300, "actions of each, after a warm-up"
    )
    with tempfile.TemporaryDirectory(prefix="settled-timeline-") as scratch:
        stack = Stack.on_free_ports(
            Path(scratch), BENCH_KINDS, ui=False, extra_env={"SETTLED_RATE_LIMIT": "off"}
        )
        with stack.running():
            results = asyncio.run(measure(stack, n))
    print(json.dumps({"actions": n, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
