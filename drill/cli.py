"""`settled drill`: the command. settled's CLI adds the flags with `plan.add_arguments(parser)` and hands
over with `run(args)`."""

import argparse
import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from settled.drill import report, results
from settled.drill.plan import Options, UsageError, parse_options, plan
from settled.drill.results import RunResult
from settled.drill.run import Environment, run_matrix, sandbox_environment
from settled.drill.stack import own_stack
from settled.drill.timeline import now

__all__ = ["drill", "exit_code", "run"]

EXIT_STATE_FAILED = 1  # the state arm made a duplicate write or a false claim
EXIT_BROKEN = 2  # the drill could not run as asked (usage, stack, failed runs)


@asynccontextmanager
async def environment(options: Options, console: Console) -> AsyncIterator[Environment]:
    if options.target_kind is not None:
        from settled.drill.target import target_environment  # the proxy and uvicorn only when needed

        assert options.config is not None
        async with target_environment(
            options.target_kind, options.config, options.params, options.changed_params, console
        ) as env:
            yield env
    elif options.api_url is not None and options.sandbox_url is not None:
        async with sandbox_environment(
            options.api_url, options.sandbox_url, f"running stack at {options.api_url}"
        ) as env:
            yield env
    else:
        async with AsyncExitStack() as resources:
            with console.status("starting the stack (Temporal dev server, worker, API, sandbox)…"):
                stack = await resources.enter_async_context(own_stack())
            env = await resources.enter_async_context(
                sandbox_environment(stack.api_url, stack.sandbox_url, "own stack, drill kinds")
            )
            yield env


async def drill(options: Options, console: Console) -> dict[str, Any]:
    """Run the matrix and write results.json, report.md and chart.png; returns the results."""
    started, clock = now(), time.monotonic()
    async with environment(options, console) as env:
        nonce = secrets.token_hex(3)  # ids differ between drills, so a running stack can be reused
        await env.warm_up(nonce)
        scenarios = plan(options.seeds, options.cuts, options.arms, env.tasks, nonce)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task("drilling", total=len(scenarios))

            def done(run: RunResult) -> None:
                progress.update(bar, advance=1, description=f"drilling · last {run.cut} {run.arm} {run.kind}")
                if run.error:
                    progress.console.print(f"[red]{run.task_id}: {run.error}[/]")

            runs = await run_matrix(scenarios, env.bench, env.make_arm, options.concurrency, done)
        description = env.description
    built = results.build(options.arms, [cut.id for cut in options.cuts], options.seeds, runs)
    meta = {
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "bench": description,
        "seconds": time.monotonic() - clock,
    }
    options.out.mkdir(parents=True, exist_ok=True)
    results.write(options.out, built)
    report.write(options.out, built, meta)
    report.draw_chart(built, options.out)
    return built


def exit_code(built: dict[str, Any]) -> int:
    if results.errored(built):
        return EXIT_BROKEN
    return EXIT_STATE_FAILED if results.state_failures(built) else 0


def run(args: argparse.Namespace) -> int:
    console = Console()
    try:
        options = parse_options(args)
    except UsageError as error:
        console.print(f"settled drill: {error}", style="red", highlight=False)
        return EXIT_BROKEN
    try:
        built = asyncio.run(drill(options, console))
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the stack or the target could not be used: say why, briefly
        console.print(f"settled drill: {type(error).__name__}: {error}", style="red", highlight=False)
        return EXIT_BROKEN
    for grid in report.tables(built):
        console.print(grid)
    console.print(report.latency_table(built))
    for line in results.state_failures(built):
        console.print(f"state arm: {line}", style="bold red")
    for line in results.errored(built):
        console.print(f"failed run: {line}", style="red", highlight=False)
    console.print(f"wrote {options.out}/results.json, report.md, chart.png")
    return exit_code(built)
