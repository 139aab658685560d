"""Running the drill: what it runs against (the bench, the tasks, how to make each arm), one run (a
scenario's caller against one arm on the bench, then its ground truth and metrics), and the whole
matrix, a few runs at a time.
"""

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from settled.drill.arms import Arm
from settled.drill.arms.state import StateArm
from settled.drill.arms.transcript import TranscriptArm
from settled.drill.bench import Bench, SandboxBench, SandboxClient
from settled.drill.call import Caller
from settled.drill.plan import SANDBOX_TASKS, Scenario, TaskKind
from settled.drill.results import RunResult, measure
from settled.drill.timeline import RunLog, now
from settled.sandbox.truth import GroundTruth

from settled.client import SettledClient

# -- what a drill runs against ---------------------------------------------------------------------

HTTP_TIMEOUT_S = 40.0  # above the longest `wait` the state arm asks for
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)


def http_client(base_url: str = "") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, timeout=HTTP_TIMEOUT_S, limits=LIMITS)


@asynccontextmanager
async def settled_client(api_url: str) -> AsyncIterator[SettledClient]:
    """settled's API as the drill uses it: without retries, so every answer is measured as given."""
    async with http_client(api_url) as http:
        yield SettledClient(http=http, timeout_s=HTTP_TIMEOUT_S, retries=0)


@dataclass
class Environment:
    bench: Bench
    tasks: tuple[TaskKind, ...]
    api: SettledClient
    service: httpx.AsyncClient | None  # where the transcript arm's tool posts (None: no transcript arm)
    description: str

    async def warm_up(self, nonce: str) -> None:
        """One throwaway action per kind, cancelled before anything is sent (no business write), so
        the first measured runs do not pay for cold workflow caches and connection pools."""
        for kind in self.tasks:
            op = f"d{nonce}-warmup-{kind.label}"
            conversation = f"{op}.conv"
            params = kind.make_params(random.Random(0))
            await self.api.create_action(conversation, kind.name, params, operation_id=op)
            await self.api.cancel(op, by="drill warm-up")
            await self.api.handoff(conversation)

    def make_arm(self, scenario: Scenario, log: RunLog) -> Arm:
        if scenario.arm == "state":
            return StateArm(scenario, log, self.api)
        if self.service is None:
            raise ValueError("the transcript arm needs the sandbox business services")
        return TranscriptArm(scenario, log, self.service)


@asynccontextmanager
async def sandbox_environment(api_url: str, sandbox_url: str, description: str) -> AsyncIterator[Environment]:
    async with (
        settled_client(api_url) as api,
        http_client(sandbox_url) as service,
    ):
        bench = SandboxBench(SandboxClient(service))
        yield Environment(bench, SANDBOX_TASKS, api, service, description)


# -- one run, and the matrix -----------------------------------------------------------------------

RUN_TIMEOUT_S = 90.0
ArmFactory = Callable[[Scenario, RunLog], Arm]


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


async def run_matrix(
    scenarios: list[Scenario],
    bench: Bench,
    make_arm: ArmFactory,
    concurrency: int,
    on_done: Callable[[RunResult], None] = lambda _result: None,
) -> list[RunResult]:
    """Results in scenario order. Runs of different tasks share the stack but never a key or a fault."""
    slots = asyncio.Semaphore(concurrency)

    async def one(scenario: Scenario) -> RunResult:
        async with slots:
            result = await run_one(scenario, bench, make_arm)
        on_done(result)
        return result

    return list(await asyncio.gather(*(one(scenario) for scenario in scenarios)))
