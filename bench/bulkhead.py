"""The bulkhead step: a healthy kind's latency alone, and beside many requested actions of a degraded
kind whose service answers each request only after `answer_s` ("one kind's trouble stays
its own"). The healthy kind's calls are timed while the degraded kind's requests are held open at its
service; the result is the ratio of the two."""

import asyncio
import time
from typing import Any

from settled.bench import engine, measures
from settled.bench.measures import Run
from settled.bench.stats import summarize
from temporalio.client import Client

from settled.domain.kinds import PLAIN_REFUND_PARAMS, KindSpec, Variant
from settled.domain.states import State

DEGRADED = "refund_degraded"
# The refund service as the degraded one: a `delay` fault makes it answer every create after
# `answer_s`; the kind's timeout is longer, so each request stays open at the service that long.
DEGRADED_KIND = Variant(
    "refund",
    {
        "commit_horizon_s": None,
        "say": None,
        "requires_authorization": None,
        "params_schema": PLAIN_REFUND_PARAMS,
        "timeout_s": 45.0,
    },
)
TARGET_P95_RATIO = 1.5


async def _healthy(run: Run, n: int) -> tuple[list[float], int]:
    """`n` healthy actions one at a time (POST ?wait=10): each one's time to its answer, and how many
    answers said confirmed (one that did not is timed all the same: that is what its caller waited)."""
    samples, confirmed = [], 0
    for _ in range(n):
        operation_id = run.new_id("healthy")
        elapsed, status = await measures.timed(lambda op=operation_id: run.create(op))
        samples.append(elapsed)
        confirmed += status is not None and status.state is State.CONFIRMED
    return samples, confirmed


async def _open_at_service(run: Run) -> int:
    rows = (await run.sandbox.get("/_sandbox/requests", params={"op": "create"})).json()["requests"]
    return sum(1 for row in rows if row["service"] == "refunds" and row["state"] == "in_flight")


async def bulkhead(
    run: Run, client: Client, spec: KindSpec, degraded: int, answer_s: float, samples: int
) -> dict[str, Any]:
    """`samples` healthy actions (POST ?wait=10, confirmed) alone; then `degraded` actions of the
    degraded kind requested (wait=0) and their requests held open at the service; then `samples` healthy
    ones again while they are held. Last, what each degraded action cost the engine (most of them
    waited in the kind's queue: the overflow path)."""
    from settled.activities.lanes import queue_slots

    alone, alone_confirmed = await _healthy(run, samples)
    fault = await run.sandbox.post(
        "/_sandbox/faults",
        json={"service": "refunds", "op": "create", "mode": "delay", "delay_s": answer_s, "count": 0},
    )
    fault.raise_for_status()
    ids = [run.new_id("degraded") for _ in range(degraded)]
    try:
        started = time.perf_counter()
        await measures.gather_limited(
            [
                lambda op=op: run.api.create_action(
                    f"conv-{op}", DEGRADED, measures.REFUND, operation_id=op, authorized=True, wait=0
                )
                for op in ids
            ],
            32,
        )
        requested_s = time.perf_counter() - started
        # The degraded kind's own queue is full (or all its requests are out): what it may hold is held.
        full = min(degraded, queue_slots(spec))
        deadline = time.perf_counter() + answer_s
        while (held_before := await _open_at_service(run)) < full and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)  # a bounded poll of the sandbox, not a wait in a test
        beside_started = time.perf_counter()
        beside, beside_confirmed = await _healthy(run, samples)
        beside_s = time.perf_counter() - beside_started
        held_after = await _open_at_service(run)
    finally:
        await run.sandbox.delete("/_sandbox/faults")  # the held requests are answered at once
    final = await measures.settle(run, ids, timeout_s=120)
    rows = (await run.sandbox.get("/_sandbox/records", params={"service": "refunds"})).json()["records"]
    keys = [row["key"] for row in rows if row["key"] in set(ids)]
    alone_s, beside_s_ = summarize(alone).as_dict(), summarize(beside).as_dict()

    def ratio(q: str) -> float | None:
        return round(beside_s_[q] / alone_s[q], 2) if alone_s[q] > 0 else None

    return {
        "degraded_requested": degraded,
        "answer_after_s": answer_s,
        "requested_in_s": round(requested_s, 2),
        "open_at_service_before": held_before,
        "open_at_service_after": held_after,
        "beside_measured_in_s": round(beside_s, 2),
        "alone_ms": alone_s,
        "beside_ms": beside_s_,
        "alone_confirmed": alone_confirmed,
        "beside_confirmed": beside_confirmed,
        "p50_ratio": ratio("p50"),
        "p95_ratio": ratio("p95"),
        "p99_ratio": ratio("p99"),
        "degraded_final_states": final,
        "degraded_records": len(keys),
        "degraded_duplicates": len(keys) - len(set(keys)),
        "degraded_engine_cost": await engine.actions_cost(client, ids),
    }
