"""Running the whole matrix: every scenario, a few at a time, reporting each run as it ends."""

import asyncio
from collections.abc import Callable

from settled.drill.bench import Bench
from settled.drill.run import ArmFactory, RunResult, run_one
from settled.drill.scenario import Scenario


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
