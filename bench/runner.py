"""Runs every measurement against a stack of its own and gathers one result document."""

import asyncio
import itertools
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from settled.bench import actions, calls, engine, measures
from settled.bench.bulkhead import DEGRADED, DEGRADED_KIND, bulkhead
from settled.bench.floor import Floor, floor_worker
from settled.bench.measures import Run, Sizes
from settled.bench.stats import summarize
from temporalio.client import Client

from settled.client import SettledClient
from settled.domain.kinds import PLAIN_BOOKING_PARAMS, PLAIN_REFUND_PARAMS, Variant, load_kinds
from settled.domain.states import State
from settled.runtime.stack import SQLITE_PRAGMAS, Stack, free_port
from settled.temporal.identity import action_workflow_id, conversation_workflow_id

NOT_DEDUPLICATED = "refund_nodedup"
# The benchmark's kinds: the sandbox booking service, deduplicating on Idempotency-Key; the same
# service with automatic reconciliation far away, so that only an event makes it look up and the time
# from `interrupted` to a verified answer is measured, not the backoff; and the refund service as one
# that does not deduplicate: a write is recorded as possibly sent before it leaves, so it is never
# sent twice without a lookup's word.
_DEFAULTS: dict[str, Any] = {"commit_horizon_s": None, "say": None}
BENCH_KINDS: dict[str, Variant] = {
    "room_booking": Variant("room_booking", _DEFAULTS),
    "room_booking_on_event": Variant(
        "room_booking",
        {
            **_DEFAULTS,
            "requires_authorization": None,
            "params_schema": PLAIN_BOOKING_PARAMS,
            "compensate": None,
            "reconcile_initial_interval_s": 600,
            "reconcile_max_interval_s": 600,
        },
    ),
    NOT_DEDUPLICATED: Variant(
        "refund",
        {
            **_DEFAULTS,
            "requires_authorization": None,
            "params_schema": PLAIN_REFUND_PARAMS,
            "idempotency_header": None,
        },
    ),
    DEGRADED: DEGRADED_KIND,  # the bulkhead step's degraded kind (bench.bulkhead)
    **calls.CALL_KINDS,  # the whole calls' shapes of kind (bench.calls)
}
STEPS = ("all", "bulkhead", "calls")


def rss_mb(pid: int) -> dict[str, float]:
    """Resident memory now and at its peak (VmRSS, VmHWM: what `/usr/bin/time -v` reports as max RSS)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields.get("VmRSS", 0.0), "peak_rss_mb": fields.get("VmHWM", 0.0)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def ratios_to_floor(results: dict[str, Any]) -> dict[str, float | None]:
    """settled's overhead over the bare call as a multiple of the floor's, and its throughput as a
    fraction of the floor's, for each kind of service (None where the floor's figure is not positive)."""

    def ratio(numerator: float, denominator: float) -> float | None:
        return round(numerator / denominator, 2) if denominator > 0 else None

    ratios: dict[str, float | None] = {}
    for suffix in ("", "_not_deduplicated"):
        settled, floor = results[f"durable_action_overhead{suffix}_ms"], results[f"floor_overhead{suffix}_ms"]
        for q in ("p50", "p95", "p99"):
            ratios[f"overhead{suffix}_{q}"] = ratio(settled[q], floor[q])
    ratios["throughput"] = ratio(
        results["throughput"]["per_second"], results["floor_throughput"]["per_second"]
    )
    if "caller_burst" in results:
        burst = results["caller_burst"]
        ratios["caller_burst_last_confirmed"] = ratio(
            burst["settled"]["last_confirmed_s"], burst["floor"]["last_confirmed_s"]
        )
    return ratios


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


Progress = Callable[[str], None]


async def measure(stack: Stack, sizes: Sizes, progress: Progress, only: str = "all") -> dict[str, Any]:
    limits = httpx.Limits(
        max_connections=max(*sizes.loads, sizes.idle_streams) + 50, max_keepalive_connections=200
    )
    async with (
        httpx.AsyncClient(base_url=stack.api_url, limits=limits) as api_http,
        httpx.AsyncClient(base_url=stack.sandbox_url, timeout=30, limits=limits) as sandbox,
        floor_worker(stack.temporal_address, stack.sandbox_url) as floor,
    ):
        # One request per call: a 503 (no answer within the wait) is counted, not retried.
        run = Run(SettledClient(stack.api_url, timeout_s=60, retries=0, http=api_http), sandbox)
        results: dict[str, Any] = {}

        async def step(name: str, work: Callable[[], Awaitable[Any]]) -> Any:
            progress(name)
            started = time.perf_counter()
            value = await work()
            progress(f"{name}: {time.perf_counter() - started:.1f}s")
            return value

        # Warm up every path (connections, imports, the workers' caches) before counting.
        await measures.bare_call(run, 5)
        await measures.durable_action(run, 5)
        if only == "bulkhead":
            results["bulkhead"] = await step("bulkhead", lambda: _bulkhead(run, floor.client, stack, sizes))
            return results
        if only == "calls":
            results["whole_call"] = await step(
                "whole calls", lambda: _whole_calls(run, api_http, floor, stack, sizes)
            )
            return results
        await measures.durable_action(run, 5, kind=NOT_DEDUPLICATED)
        await measures.floor_actions(floor, 5, deduplicated=True)
        await measures.floor_actions(floor, 5, deduplicated=False)

        # Interleave every arm in blocks, so drifting load hits them all alike.
        arms: dict[str, Callable[[int], Awaitable[list[float]]]] = {
            "bare_call_ms": lambda n: measures.bare_call(run, n),
            "durable_action_ms": lambda n: measures.durable_action(run, n),
            "floor_ms": lambda n: measures.floor_actions(floor, n, deduplicated=True),
            "bare_call_not_deduplicated_ms": lambda n: measures.bare_call(run, n, deduplicated=False),
            "durable_action_not_deduplicated_ms": lambda n: measures.durable_action(
                run, n, kind=NOT_DEDUPLICATED
            ),
            "floor_not_deduplicated_ms": lambda n: measures.floor_actions(floor, n, deduplicated=False),
        }
        samples: dict[str, list[float]] = {name: [] for name in arms}
        block = max(1, sizes.sequential // 10)
        for _ in range(0, sizes.sequential, block):
            for name, arm in arms.items():
                samples[name] += await arm(block)
        progress(f"bare, durable and floor: {sizes.sequential} samples each, both kinds of service")
        for name, values in samples.items():
            results[name] = summarize(values).as_dict()
        for suffix in ("", "_not_deduplicated"):
            bare = results[f"bare_call{suffix}_ms"]
            for arm in ("durable_action", "floor"):
                results[f"{arm}_overhead{suffix}_ms"] = {
                    q: round(results[f"{arm}{suffix}_ms"][q] - bare[q], 2) for q in ("p50", "p95", "p99")
                }
        results["overhead_ms"] = results["durable_action_overhead_ms"]
        results["engine_cost"] = await step(
            "engine cost per confirmed action", lambda: _engine_cost(run, floor, sizes.engine_samples)
        )

        results["billable_actions"] = await step(
            "Temporal Cloud's billable Actions per flow",
            lambda: _billable_actions(run, floor, stack, sizes.engine_samples),
        )

        in_flight = await step("actions in flight", lambda: measures.waiting_actions(run, sizes.in_flight))
        reads = await step(
            "status reads, one reader", lambda: measures.status_reads(run, in_flight, sizes.status_reads, 1)
        )
        results["status_read_ms"] = {"in_flight": len(in_flight), **summarize(reads).as_dict()}
        reads = await step(
            "status reads, 8 readers", lambda: measures.status_reads(run, in_flight, sizes.status_reads, 8)
        )
        results["status_read_8_readers_ms"] = {"in_flight": len(in_flight), **summarize(reads).as_dict()}

        interrupts = await step(
            "interrupted → verified", lambda: measures.interrupt_to_verified(run, sizes.interrupts)
        )
        results["interrupt_to_verified_ms"] = summarize(interrupts).as_dict()

        # One reader keeps reading while the sustained load runs: what a channel sees under load.
        pids = {name: child.popen.pid for name, child in stack.children.items()}
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        results["throughput"], reads = await step(
            "throughput",
            lambda: asyncio.gather(
                measures.throughput(run, sizes.throughput_s, sizes.throughput_concurrency),
                measures.status_reads_for(run, in_flight, sizes.throughput_s),
            ),
        )
        results["status_read_under_load_ms"] = summarize(reads).as_dict()
        created = max(1, results["throughput"]["created"])
        results["cpu_ms_per_action"] = {
            name: round((cpu_seconds(pid) - cpu_before[name]) * 1000 / created, 1)
            for name, pid in pids.items()
        }

        temporal = pids["temporal"]
        for deduplicated, name in ((True, "floor_throughput"), (False, "floor_throughput_not_deduplicated")):
            before = (cpu_seconds(temporal), own_cpu_seconds())
            results[name] = await step(
                name.replace("_", " "),
                lambda d=deduplicated: measures.floor_throughput(
                    floor, sizes.throughput_s, sizes.throughput_concurrency, d
                ),
            )
            done = max(1, results[name]["confirmed"])
            results[name]["cpu_ms_per_action"] = {
                "temporal": round((cpu_seconds(temporal) - before[0]) * 1000 / done, 1),
                "bench process (its worker and callers)": round(
                    (own_cpu_seconds() - before[1]) * 1000 / done, 1
                ),
            }
        results["vs_floor"] = ratios_to_floor(results)

        results["idle_streams"] = await step(
            "idle streams", lambda: _idle_stream_cost(run, stack, in_flight, sizes)
        )

        loads = {}
        for n in sizes.loads:
            loads[str(n)] = await step(f"burst of {n}", lambda n=n: measures.burst(run, n))
        results["latency_by_concurrency_ms"] = loads
        n, callers = sizes.caller_burst, sizes.caller_burst_callers
        results["caller_burst"] = await step(
            f"burst of {n} from {callers} callers", lambda: _caller_burst(run, floor, n, callers)
        )
        results["vs_floor"] = ratios_to_floor(results)

        extra = max(0, sizes.waiting - sizes.in_flight)
        await step("actions waiting", lambda: measures.waiting_actions(run, extra))
        results["memory"] = {
            "waiting_actions": sizes.in_flight + extra,
            "worker": rss_mb(stack.children["worker"].popen.pid),
            "workers": len([name for name in stack.children if name.startswith("worker")]),
            "api": rss_mb(stack.children["api"].popen.pid),
            "temporal": rss_mb(stack.children["temporal"].popen.pid),
        }
        keys = [row["key"] for row in await run.records()]
        results["sandbox_records"] = {"total": len(keys), "duplicates": len(keys) - len(set(keys))}
        # Last: its degraded service is the refund service the other steps use.
        results["bulkhead"] = await step("bulkhead", lambda: _bulkhead(run, floor.client, stack, sizes))
        # After it: the whole calls' activity shape is the refund service, healthy again by then.
        results["whole_call"] = await step(
            "Temporal Cloud's Actions and storage of a whole call, per door and shape of kind",
            lambda: _whole_calls(run, api_http, floor, stack, sizes),
        )
        return results


async def _engine_cost(run: Run, floor: Floor, n: int) -> dict[str, Any]:
    """`n` confirmed bookings one at a time through settled, each in a new conversation; `n` more in one
    conversation that its channel opened first, as every adapter and platform edge does; and `n` of
    the floor's. All counted in their histories (bench.engine)."""

    async def confirmed(op: str, conversation_id: str | None = None) -> None:
        status = await run.create(op, conversation_id=conversation_id)
        if status is None or status.state is not State.CONFIRMED:
            raise measures.BenchError(f"{op}: not confirmed ({status.state if status else 'unanswered'})")

    ops = [run.new_id("engine") for _ in range(n)]
    for op in ops:
        await confirmed(op)
    call = run.new_id("engine-call")
    await run.api.conversation_event(call, "channel_opened", "voice")
    in_call = [run.new_id("engine-in-call") for _ in range(n)]
    for op in in_call:
        await confirmed(op, call)
    first = len(floor.ids)
    await measures.floor_actions(floor, n, deduplicated=True)
    return {
        "settled": await engine.settled_cost(floor.client, ops, measures.conversations_of(ops)),
        "settled_in_opened_conversation": await engine.settled_cost(floor.client, in_call, [call]),
        "floor": await engine.floor_cost(floor.client, floor.ids[first:]),
    }


async def _billable_actions(run: Run, floor: Floor, stack: Stack, n: int) -> dict[str, Any]:
    """Temporal Cloud's billable Actions per confirmed action (bench.actions), flow by flow: in a live
    call (its channel opened first), in a new conversation, a booking that waits for the go-ahead; and
    per call, the `presented` an adapter sends after speaking, a handoff read, a status read; beside
    the floor's (one workflow, one local activity). Each counted as what the flow added to the
    histories it touched, plus the queries the API sent meanwhile."""
    client, metrics = floor.client, stack.temporal_metrics_url

    async def flow(work: Callable[[], Awaitable[Any]], touched: Callable[[], list[str]]) -> dict[str, Any]:
        queries_before = await actions.queries_so_far(client, metrics)
        before = await actions.billed_in_histories(client, touched())
        await work()
        added = (await actions.billed_in_histories(client, touched())).minus(before)
        added.counts["query"] += await actions.queries_so_far(client, metrics) - queries_before
        return added.per(n)

    async def confirmed(op: str, conversation_id: str | None = None, authorized: bool = True) -> None:
        status = await run.create(op, conversation_id=conversation_id, authorized=authorized)
        if authorized and (status is None or status.state is not State.CONFIRMED):
            raise measures.BenchError(f"{op}: not confirmed ({status.state if status else 'unanswered'})")

    call = run.new_id("billed-call")
    in_call = [run.new_id("billed-in-call") for _ in range(n)]
    alone = [run.new_id("billed-alone") for _ in range(n)]
    held = [run.new_id("billed-go-ahead") for _ in range(n)]

    async def live_call() -> list[str]:
        await run.api.conversation_event(call, "channel_opened", "voice")
        for op in in_call:
            await confirmed(op, call)
        return in_call

    async def new_conversations() -> list[str]:
        for op in alone:
            await confirmed(op)
        return alone

    async def go_ahead() -> list[str]:
        for op in held:
            await confirmed(op, authorized=False)
            status = await run.api.authorize(op, "caller", wait=measures.WAIT_S)
            if status.state is not State.CONFIRMED:
                raise measures.BenchError(f"{op}: not confirmed after the go-ahead ({status.state})")
        return held

    async def presented() -> list[str]:
        for op in in_call:
            status = await run.api.get(op)
            await run.api.presented(op, "voice", status.say, True, for_state=status.state)
        return in_call

    async def handoffs() -> list[str]:
        for _ in range(n):
            await run.api.handoff(call)
        return in_call

    async def status_reads() -> list[str]:
        for op in in_call:
            await run.api.get(op)
        return in_call

    def workflows(ops: list[str], conversations: list[str]) -> Callable[[], list[str]]:
        ids = [action_workflow_id(None, op) for op in ops]
        return lambda: ids + [conversation_workflow_id(None, c) for c in conversations]

    in_call_ids = workflows(in_call, [call])
    first = len(floor.ids)
    return {
        "actions": n,
        "in_live_call": await flow(live_call, in_call_ids),
        "in_new_conversation": await flow(
            new_conversations, workflows(alone, measures.conversations_of(alone))
        ),
        "waiting_for_go_ahead": await flow(go_ahead, workflows(held, measures.conversations_of(held))),
        "presented_call": await flow(presented, in_call_ids),
        "handoff_read": await flow(handoffs, in_call_ids),
        "status_read": await flow(status_reads, in_call_ids),
        "floor": await flow(
            lambda: measures.floor_actions(floor, n, deduplicated=True), lambda: floor.ids[first:]
        ),
    }


async def _whole_calls(
    run: Run, api_http: httpx.AsyncClient, floor: Floor, stack: Stack, sizes: Sizes
) -> dict[str, Any]:
    """Whole calls through each door, each shape of kind (bench.calls)."""
    door = calls.Door(run, api_http, stack.api_url, floor.client, itertools.count())
    kinds = load_kinds(stack.config)
    metrics = stack.temporal_metrics_url
    return await calls.whole_calls(door, kinds, metrics, sizes.call_doors, sizes.calls, sizes.call_actions)


async def _caller_burst(run: Run, floor: Floor, n: int, callers: int) -> dict[str, Any]:
    """Settled's burst from `callers` callers, then the floor's, and what each cost the engine."""
    settled = await measures.burst_from_callers(run, n, callers)
    ops = settled.pop("operation_ids")
    floor_burst = await measures.floor_burst_from_callers(floor, n, callers)
    ids = floor_burst.pop("ids")
    return {
        "settled": settled,
        "floor": floor_burst,
        "engine_cost": {
            "settled": await engine.settled_cost(floor.client, ops, measures.conversations_of(ops)),
            "floor": await engine.floor_cost(floor.client, ids),
        },
    }


async def _bulkhead(run: Run, client: Client, stack: Stack, sizes: Sizes) -> dict[str, Any]:
    spec = load_kinds(stack.config).get(DEGRADED)
    assert spec is not None
    degraded, answer_s, samples = sizes.bulkhead_degraded, sizes.bulkhead_answer_s, sizes.bulkhead_samples
    return await bulkhead(run, client, spec, degraded, answer_s, samples)


async def _idle_stream_cost(run: Run, stack: Stack, in_flight: list[str], sizes: Sizes) -> dict[str, Any]:
    """CPU of every process, as a share of one core, while `idle_streams` streams stay open and
    nothing changes on their conversations; and the same with no stream open, in windows just before
    and just after, so that work left over from the steps before (a backlog draining) is not counted
    as the streams' cost: `streams_cost_percent` is the difference from the baselines' mean."""
    conversations = measures.conversations_of(in_flight)
    pids = {name: child.popen.pid for name, child in stack.children.items()}

    async def window() -> dict[str, float]:
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        await asyncio.sleep(sizes.idle_stream_s)  # the measurement window, not a wait for a condition
        elapsed = time.perf_counter() - started
        used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        return {name: round(100 * cpu / elapsed, 2) for name, cpu in used.items()}

    baseline_before = await window()
    async with measures.idle_streams(run, conversations, sizes.idle_streams) as opened:
        with_streams = await window()
    baseline_after = await window()
    baseline = {name: round((baseline_before[name] + baseline_after[name]) / 2, 2) for name in pids}
    return {
        "streams": opened,
        "seconds": sizes.idle_stream_s,
        "core_percent": with_streams,
        "baseline_core_percent": baseline,
        "streams_cost_percent": {name: round(with_streams[name] - baseline[name], 2) for name in pids},
    }


def run_bench(
    sizes: Sizes,
    progress: Progress,
    extra_env: dict[str, str] | None = None,
    sqlite_pragmas: tuple[str, ...] = SQLITE_PRAGMAS,
    workers: int = 1,
    only: str = "all",
) -> dict[str, Any]:
    """Start a stack, measure, stop it. The result carries the machine and the settings it ran with."""
    about = {
        **machine(),
        "sqlite_pragmas": list(sqlite_pragmas),
        "env": extra_env or {},
        "worker_processes": workers,
    }
    with tempfile.TemporaryDirectory(prefix="settled-bench-") as scratch:
        env = {"SETTLED_RATE_LIMIT": "off", **(extra_env or {})}
        stack = Stack.on_free_ports(
            Path(scratch),
            BENCH_KINDS,
            ui=False,
            extra_env=env,
            sqlite_pragmas=sqlite_pragmas,
            workers=workers,
        )
        # The dev server's own metrics count the queries the API sends (billable Actions on Cloud).
        ports = stack.ports
        taken = frozenset((ports.api, ports.temporal, ports.ui, ports.sandbox, ports.worker_metrics))
        ports.temporal_metrics = free_port(taken)
        with stack.running():
            results = asyncio.run(measure(stack, sizes, progress, only))
    return {"machine": about, "sizes": sizes.__dict__, "results": results}
