"""Setting up `--target-kind`: the user's kind, one fault proxy per origin it calls, a temporary
kinds file pointing settled at the proxies, and a stack of the drill's own that uses it."""

import tomllib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from settled.drill import proxy, sample_params
from settled.drill.environment import HTTP_TIMEOUT_S, LIMITS, Environment
from settled.drill.stack import own_stack
from settled.drill.target import CALLS, TargetBench, origin, rewrite
from settled.drill.tasks import fixed_task
from settled.drill.tomlout import kinds_file

from settled.kinds import KindSpec, load_kinds, parse_kinds
from settled.params import InvalidParams, validate_params


class TargetError(ValueError):
    """The target kind cannot be drilled as given; the message says why."""


def _spec(kind: str, config: Path) -> tuple[KindSpec, dict[str, Any]]:
    kinds = load_kinds(config)
    spec = kinds.get(kind)
    if spec is None:
        raise TargetError(f"{config} declares no kind {kind!r} (it has: {', '.join(kinds.names())})")
    if spec.lookup is None:
        raise TargetError(f"kind {kind!r} has no lookup URL: the drill reads the ground truth through it")
    table: dict[str, Any] = tomllib.loads(config.read_text())["kinds"][kind]
    return spec, table


def _params(
    spec: KindSpec, given: dict[str, Any] | None, changed: dict[str, Any] | None
) -> tuple[dict, dict]:
    try:
        params = given or sample_params.sample(spec.params_schema)
        after = changed or sample_params.changed(spec.params_schema, params)
        for flag, value in (("--params", params), ("--changed-params", after)):
            try:
                validate_params(spec, value)
            except InvalidParams as error:
                raise TargetError(f"{flag} {value}: {error}") from None
    except sample_params.NoSample as error:
        raise TargetError(str(error)) from None
    if after == params:
        raise TargetError("--changed-params must differ from --params (C6 changes a parameter)")
    return params, after


@asynccontextmanager
async def target_environment(
    kind: str,
    config: Path,
    params: dict[str, Any] | None,
    changed: dict[str, Any] | None,
    console: Console,
) -> AsyncIterator[Environment]:
    spec, table = _spec(kind, config)
    params, after = _params(spec, params, changed)
    origins = sorted({origin(call.url) for name in CALLS if (call := getattr(spec, name)) is not None})
    async with AsyncExitStack() as stack:
        proxies = {url: await stack.enter_async_context(proxy.running(url)) for url in origins}
        text = kinds_file({kind: rewrite(table, {url: p.url for url, p in proxies.items()})})
        parse_kinds(text, "the drill's temporary kinds file")  # fail here, not in the worker
        with console.status(f"starting the stack, with {kind} behind the fault proxy…"):
            running = await stack.enter_async_context(own_stack(text, with_sandbox=False))
        api = await stack.enter_async_context(
            httpx.AsyncClient(base_url=running.api_url, timeout=HTTP_TIMEOUT_S, limits=LIMITS)
        )
        direct = await stack.enter_async_context(httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, limits=LIMITS))
        bench = TargetBench(spec, proxies, direct)
        task = fixed_task(kind, spec.description, params, after)
        yield Environment(
            bench, (task,), api, None, f"kind {kind} at {', '.join(origins)} behind the fault proxy"
        )
