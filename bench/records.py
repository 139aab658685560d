"""What a conversation's record costs the dev server, against the cheaper records it could be:
`python -m settled.bench.records [N]` (docs/performance/engine-cost.md).

A new action's conversation is recorded today as a lazily started execution: a start with a 30-day
start delay that carries the action's id as its start signal, and runs no workflow task. The
alternatives are signals into executions that already exist (an index sharded over a few long-lived
executions, per window of time): with the start, or without it. Each shape runs `n` times from 16
callers on one fresh dev server; the server's CPU per operation is read from /proc, as the bench
reads it. No worker runs: none of these shapes needs one.
"""

import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from settled.bench.cli import probe_count
from settled.bench.runner import cpu_seconds
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from settled.runtime.stack import Ports, Stack

CALLERS = 16
SHARDS = 32
DELAY = timedelta(days=30)
WORKFLOW = "SettledRecordProbe"  # never run: no worker polls its queue
QUEUE = "settled-record-probe"


async def _timed(n: int, one: Callable[[int], Awaitable[object]], pid: int) -> dict[str, float]:
    gate = asyncio.Semaphore(CALLERS)

    async def call(i: int) -> None:
        async with gate:
            await one(i)

    cpu, started = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(call(i) for i in range(n)))
    elapsed = time.perf_counter() - started
    return {"per_second": round(n / elapsed), "server_cpu_ms": round((cpu_seconds(pid) - cpu) * 1000 / n, 2)}


async def measure(client: Client, pid: int, n: int, rounds: int = 2) -> dict[str, list[dict[str, float]]]:
    tag = uuid.uuid4().hex[:8]
    shards = [f"probe-{tag}-shard-{s}" for s in range(SHARDS)]
    for shard in shards:
        await client.start_workflow(WORKFLOW, id=shard, task_queue=QUEUE, start_delay=DELAY)

    def start(workflow_id: str, i: int) -> Awaitable[object]:
        """A start carrying the action's id as its start signal; to a running one, just the signal."""
        return client.start_workflow(
            WORKFLOW,
            id=workflow_id,
            task_queue=QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_delay=DELAY,
            start_signal="track_action",
            start_signal_args=[f"op-{i}"],
        )

    def lazy_start(prefix: str) -> Callable[[int], Awaitable[object]]:
        return lambda i: start(f"{prefix}-{i}", i)

    def signal_with_start(i: int) -> Awaitable[object]:
        return start(shards[i % SHARDS], i)

    def signal(i: int) -> Awaitable[object]:
        return client.get_workflow_handle(shards[i % SHARDS]).signal("track_action", f"op-{i}")

    await _timed(min(n, 50), lazy_start(f"probe-{tag}-warm"), pid)
    results: dict[str, list[dict[str, float]]] = {
        "a new execution, started lazily (today's conversation)": [],
        "signal-with-start into one of 32 existing executions": [],
        "signal into one of 32 existing executions": [],
    }
    for round_ in range(rounds):
        shapes = [lazy_start(f"probe-{tag}-conv-{round_}"), signal_with_start, signal]
        for name, shape in zip(results, shapes, strict=True):
            results[name].append(await _timed(n, shape, pid))
    return results


def main(argv: list[str] | None = None) -> int:
    n = probe_count(
        argv, "python -m settled.bench.records", __doc__, 1500, "operations of each shape per round"
    )
    with tempfile.TemporaryDirectory(prefix="settled-records-") as scratch:
        stack = Stack(Path(scratch), Ports.free(), sandbox=False, ui=False)
        server = stack.start_server()
        try:

            async def run() -> dict[str, list[dict[str, float]]]:
                client = await Client.connect(stack.temporal_address)
                return await measure(client, server.popen.pid, n)

            print(json.dumps({"operations": n, "callers": CALLERS, "results": asyncio.run(run())}, indent=2))
        finally:
            stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
