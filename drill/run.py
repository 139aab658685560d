"""One run: a scenario's caller against one arm on the bench, then its ground truth and metrics."""

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, Field
from settled.drill.arms import Arm
from settled.drill.bench import Bench
from settled.drill.caller import Caller
from settled.drill.metrics import RunMetrics, measure
from settled.drill.runlog import RunLog
from settled.drill.scenario import Scenario
from settled.drill.timeline import Timeline, now
from settled.sandbox.truth import GroundTruth

RUN_TIMEOUT_S = 90.0
ArmFactory = Callable[[Scenario, RunLog], Arm]


class RunResult(BaseModel):
    arm: str
    cut: str
    seed: int
    kind: str
    task_id: str
    conversation_id: str
    variant: str | None
    started_at: datetime
    duration_ms: float
    error: str | None = None
    notes: list[str] = Field(default_factory=list)
    metrics: RunMetrics
    timeline: Timeline
    truth: GroundTruth


async def run_one(scenario: Scenario, bench: Bench, make_arm: ArmFactory) -> RunResult:
    log = RunLog()
    arm = make_arm(scenario, log)
    started_at, started = now(), time.monotonic()
    error = None
    try:
        await bench.prepare(scenario)
        async with asyncio.timeout(RUN_TIMEOUT_S):
            await Caller(scenario, arm, log, bench).run()
            await arm.settle()
    except Exception as failure:  # a run that breaks is reported, not allowed to stop the matrix
        error = f"{type(failure).__name__}: {failure}"
    finally:
        await arm.close()
    try:
        truth = await bench.finish(scenario)
    except Exception as failure:  # without ground truth the run proves nothing: say so
        error = error or f"reading the ground truth: {type(failure).__name__}: {failure}"
        truth = GroundTruth(source="unavailable")
    return RunResult(
        arm=scenario.arm,
        cut=scenario.cut.id,
        seed=scenario.seed,
        kind=scenario.kind.name,
        task_id=scenario.task_id,
        conversation_id=scenario.conversation_id,
        variant=scenario.variant,
        started_at=started_at,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        error=error,
        notes=list(getattr(arm, "notes", [])),
        metrics=measure(log.timeline, truth),
        timeline=log.timeline,
        truth=truth,
    )
