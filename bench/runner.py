"""Runs every measurement against a stack of its own and gathers one result document."""

import asyncio
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench import measures
from bench.measures import Run, Sizes
from bench.stats import summarize
from settled.stack import SQLITE_PRAGMAS, Ports, Stack

KINDS = Path(__file__).parent / "kinds.toml"


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


def start_stack(
    data_dir: Path,
    extra_env: dict[str, str],
    sqlite_pragmas: tuple[str, ...] = SQLITE_PRAGMAS,
    workers: int = 1,
) -> Stack:
    ports = Ports.free()
    kinds = data_dir / "kinds.toml"
    kinds.write_text(KINDS.read_text().replace("@SANDBOX_URL@", f"http://127.0.0.1:{ports.sandbox}"))
    env = {"SETTLED_RATE_LIMIT": "off", **extra_env}
    stack = Stack(data_dir, ports, config=kinds, ui=False, extra_env=env, sqlite_pragmas=sqlite_pragmas)
    stack.start()
    for n in range(2, workers + 1):  # more worker processes on the same task queue
        stack.start_worker(f"worker-{n}")
    return stack


Progress = Callable[[str], None]


async def measure(stack: Stack, sizes: Sizes, progress: Progress) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=max(sizes.loads) + 50, max_keepalive_connections=200)
    async with (
        httpx.AsyncClient(base_url=stack.api_url, timeout=60, limits=limits) as api,
        httpx.AsyncClient(base_url=stack.sandbox_url, timeout=30, limits=limits) as sandbox,
    ):
        run = Run(api, sandbox)
        results: dict[str, Any] = {}

        async def step(name: str, work: Callable[[], Awaitable[Any]]) -> Any:
            progress(name)
            started = time.perf_counter()
            value = await work()
            progress(f"{name}: {time.perf_counter() - started:.1f}s")
            return value

        # Warm up both paths (connections, imports, the worker's workflow cache) before counting.
        await measures.bare_call(run, 5)
        await measures.durable_action(run, 5)

        # Interleave the bare and durable samples in blocks, so drifting load hits both alike.
        bare: list[float] = []
        durable: list[float] = []
        block = max(1, sizes.sequential // 10)
        for _ in range(0, sizes.sequential, block):
            bare += await measures.bare_call(run, block)
            durable += await measures.durable_action(run, block)
        progress(f"bare and durable: {len(durable)} samples each")
        results["bare_call_ms"] = summarize(bare).as_dict()
        results["durable_action_ms"] = summarize(durable).as_dict()
        results["overhead_ms"] = {
            q: round(results["durable_action_ms"][q] - results["bare_call_ms"][q], 2)
            for q in ("p50", "p95", "p99")
        }

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

        loads = {}
        for n in sizes.loads:
            loads[str(n)] = await step(f"burst of {n}", lambda n=n: measures.burst(run, n))
        results["latency_by_concurrency_ms"] = loads

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
        return results


def run_bench(
    sizes: Sizes,
    progress: Progress,
    extra_env: dict[str, str] | None = None,
    sqlite_pragmas: tuple[str, ...] = SQLITE_PRAGMAS,
    workers: int = 1,
) -> dict[str, Any]:
    """Start a stack, measure, stop it. The result carries the machine and the settings it ran with."""
    about = {
        **machine(),
        "sqlite_pragmas": list(sqlite_pragmas),
        "env": extra_env or {},
        "worker_processes": workers,
    }
    with tempfile.TemporaryDirectory(prefix="settled-bench-") as scratch:
        stack = start_stack(Path(scratch), extra_env or {}, sqlite_pragmas, workers)
        try:
            results = asyncio.run(measure(stack, sizes, progress))
        finally:
            stack.stop()
    return {"machine": about, "sizes": sizes.__dict__, "results": results}
