"""`--target-kind`: the state arm's cuts against a user's own (staging) service.

settled reaches the service through a fault proxy per origin (its URLs rewritten in a temporary
kinds file, written back out as TOML), and the proxy plays the sandbox's faults. Params, when none
are given, are built from the kind's JSON Schema.

Ground truth never comes from settled, only from what the service itself said: a sign is one answer
of the service about the task (a 2xx to a write, seen by the proxy even when the client never got
it; a lookup, the drill's own, polled directly, or settled's through the proxy; a successful
compensation). Each has the time the question left and the time the answer arrived, so an answer
that was already under way when the record was made cannot be misread as the record vanishing.
"""

import asyncio
import contextlib
import json
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from settled.drill.bench import HELD_TIMEOUT_S, QUIET_TIMEOUT_S, poll
from settled.drill.plan import LATE_COMMIT_AFTER_TIMEOUT_S, Scenario, fixed_task
from settled.drill.proxy import Exchange, FaultProxy, ProxyMode
from settled.drill.proxy import running as running_proxy
from settled.drill.run import Environment, http_client, settled_client
from settled.drill.stack import own_stack
from settled.drill.timeline import now
from settled.sandbox.truth import GroundTruth, Record, Write

from settled.domain.kinds import HttpCall, KindSpec, kinds_toml, load_kinds, parse_kinds
from settled.domain.params import InvalidParams, validate_params
from settled.domain.templates import lookup_path, render

# -- ground truth from signs ------------------------------------------------------------------

Says = Literal["applied", "reversed", "absent"]


@dataclass(frozen=True)
class Sign:
    sent: datetime
    at: datetime
    says: Says
    ref: str | None = None  # the record it is about (None: the task's record, whatever its id)
    payload: dict[str, Any] | None = None  # what was written (a write) or what the service shows (a lookup)


def truth_from_signs(signs: list[Sign], writes: list[Write], source: str) -> GroundTruth:
    created: dict[str, datetime] = {}
    payloads: dict[str, dict[str, Any]] = {}
    reversed_at: dict[str, datetime] = {}
    ordered = sorted(signs, key=lambda s: s.at)
    # An answer that carries no reference is about the task's record: the first one that has one.
    default = next((sign.ref for sign in ordered if sign.ref is not None), "applied")
    for sign in ordered:
        ref = sign.ref or default
        if sign.says in ("applied", "reversed"):
            created.setdefault(ref, sign.at)
            if sign.payload:
                payloads.setdefault(ref, sign.payload)
        if sign.says == "reversed":
            reversed_at.setdefault(ref, sign.at)
        if sign.says == "absent":
            for known, at in created.items():
                if at < sign.sent:  # it stood before the question was asked, and is gone now
                    reversed_at.setdefault(known, sign.at)
    records = [
        Record(
            id=ref,
            payload=payloads.get(ref, {}),
            status="cancelled" if ref in reversed_at else "applied",
            committed_at=at,
            cancelled_at=reversed_at.get(ref),
        )
        for ref, at in sorted(created.items(), key=lambda item: item[1])
    ]
    return GroundTruth(records=records, writes=writes, source=source)


# -- params for a kind when none are given: from its JSON Schema (examples, defaults, enums, then
# simple values that satisfy the usual constraints), and a change of one field for C6 ------------


class NoSample(ValueError):
    """The schema asks for something a simple value cannot satisfy; the user must give params."""


def _sample_value(name: str, schema: dict[str, Any]) -> Any:
    for hint in ("examples", "enum"):
        if schema.get(hint):
            return schema[hint][0]
    if "default" in schema or "const" in schema:
        return schema.get("const", schema.get("default"))
    kind = schema.get("type")
    if kind == "string" and "pattern" not in schema and "format" not in schema:
        return f"drill-{name}".ljust(int(schema.get("minLength", 0)), "x")
    if kind in ("number", "integer"):
        floor = max(float(schema.get("minimum", 1)), float(schema.get("exclusiveMinimum", 0)) + 1)
        return int(floor) if kind == "integer" else round(floor + 0.5, 2)
    if kind == "boolean":
        return True
    raise NoSample(f"cannot make up a value for {name!r} ({schema}); pass --params")


def sample_params(schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    wanted = schema.get("required", list(properties))
    return {name: _sample_value(name, properties.get(name, {})) for name in wanted}


def changed_params(schema: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The same params with one field changed: the first number grows, else the first free string."""
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, current in params.items():
        spec = properties.get(name, {})
        if isinstance(current, bool) or "enum" in spec or "const" in spec:
            continue
        if isinstance(current, int | float) and "maximum" not in spec:
            return {**params, name: current + 1}
    for name, current in params.items():
        spec = properties.get(name, {})
        if isinstance(current, str) and not {"enum", "const", "pattern", "format", "maxLength"} & set(spec):
            return {**params, name: f"{current}-changed"}
    raise NoSample("cannot make up a changed value for any param; pass --changed-params")


# -- the target bench: faults in the proxy, signs from lookups and the proxy's log ----------------

SAMPLE_EVERY_S = 0.05
PROXY_MODES: dict[str, ProxyMode] = {
    "drop_after_apply": "drop_after_forward",
    "fail_before_apply": "unavailable",
    "hold": "hold",
    "late_commit": "delay",  # forwarded after the client gave up: the service commits it late
}
CALLS = ("dispatch", "lookup", "compensate")


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def path_pattern(url: str) -> str:
    """The path of a URL template as a regular expression: each {placeholder} is one segment."""
    pieces = re.split(r"\{[^}]+\}", urlsplit(url).path or "/")
    return "^" + "[^/]+".join(re.escape(piece) for piece in pieces) + "$"


def rewrite(table: dict[str, Any], proxies: dict[str, str]) -> dict[str, Any]:
    """A kind's table with every call's origin replaced by its proxy's."""
    rewritten = dict(table)
    for call in CALLS:
        if call in table:
            url = table[call]["url"]
            rewritten[call] = {**table[call], "url": proxies[origin(url)] + url[len(origin(url)) :]}
    return rewritten


def looks_reversed(body: Any) -> bool:
    """A lookup that still finds the record but says it was reversed (a heuristic: a top-level
    `status` or `state` that mentions cancel)."""
    return isinstance(body, dict) and any(
        "cancel" in str(body.get(name, "")).lower() for name in ("status", "state")
    )


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _calls(call: HttpCall, exchange: Exchange) -> bool:
    return exchange.method == call.method and re.search(path_pattern(call.url), exchange.path) is not None


@dataclass
class _Watch:
    signs: list[Sign] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class TargetBench:
    def __init__(self, spec: KindSpec, proxies: dict[str, FaultProxy], direct: httpx.AsyncClient) -> None:
        if spec.lookup is None or spec.dispatch is None:
            raise ValueError(f"kind {spec.name} has no lookup URL: the drill needs one for ground truth")
        self.spec = spec
        self.dispatch = spec.dispatch
        self.lookup = spec.lookup
        self.proxies = proxies
        self.direct = direct
        self.dispatch_proxy = proxies[origin(self.dispatch.url)]
        self._faults: dict[str, str] = {}
        self._watches: dict[str, _Watch] = {}

    # -- reading the service ---------------------------------------------------------------------

    def _lookup_url(self, scenario: Scenario) -> str:
        return render(self.lookup.url, {"operation_id": scenario.task_id, "params": scenario.wanted})

    def _lookup_sign(self, sent: datetime, at: datetime, status: int, body: Any) -> Sign | None:
        if status == 404:
            return Sign(sent, at, "absent")
        if status != 200:
            return None  # says nothing either way
        ref = lookup_path(body, self.spec.reference_field)
        says = "reversed" if looks_reversed(body) else "applied"
        shown = body if isinstance(body, dict) else None
        return Sign(sent, at, says, None if ref is None else str(ref), shown)

    async def _look(self, scenario: Scenario, watch: _Watch) -> None:
        sent = now()
        with contextlib.suppress(httpx.HTTPError):
            response = await self.direct.get(self._lookup_url(scenario))
            sign = self._lookup_sign(sent, now(), response.status_code, _json(response.text))
            if sign is not None:
                watch.signs.append(sign)

    async def _sample(self, scenario: Scenario, watch: _Watch) -> None:
        while True:
            await self._look(scenario, watch)
            await asyncio.sleep(SAMPLE_EVERY_S)

    def _exchanges(self, scenario: Scenario) -> list[Exchange]:
        return [e for proxy in self.proxies.values() for e in proxy.involving(scenario.task_id)]

    def _compensations(self, scenario: Scenario, ref: str) -> list[Exchange]:
        if self.spec.compensate is None:
            return []
        values = {"operation_id": scenario.task_id, "business_ref": ref, "params": scenario.wanted}
        path = urlsplit(render(self.spec.compensate.url, values)).path
        return [
            e
            for proxy in self.proxies.values()
            for e in proxy.exchanges
            if e.method == self.spec.compensate.method and e.path == path
        ]

    def signs(self, scenario: Scenario, sampled: list[Sign]) -> tuple[list[Sign], list[Write]]:
        signs, writes = list(sampled), []
        for exchange in self._exchanges(scenario):
            if exchange.upstream_at is None or exchange.upstream_status is None:
                continue
            body = _json(exchange.upstream_body)
            if _calls(self.dispatch, exchange) and 200 <= exchange.upstream_status < 300:
                ref = lookup_path(body, self.spec.reference_field)
                ref_text = None if ref is None else str(ref)
                written = _json(exchange.body)
                payload = written if isinstance(written, dict) else None
                signs.append(Sign(exchange.received_at, exchange.upstream_at, "applied", ref_text, payload))
            elif _calls(self.lookup, exchange):
                sign = self._lookup_sign(
                    exchange.received_at, exchange.upstream_at, exchange.upstream_status, body
                )
                signs += [sign] if sign is not None else []
        for exchange in self._exchanges(scenario):
            if _calls(self.dispatch, exchange) and exchange.forwarded:
                writes.append(
                    Write(
                        received_at=exchange.received_at,
                        finished_at=exchange.finished_at,
                        outcome=exchange.outcome,
                        status=exchange.upstream_status,
                    )
                )
        for ref in {sign.ref for sign in signs if sign.ref is not None}:
            for exchange in self._compensations(scenario, ref):
                if (
                    exchange.upstream_at
                    and exchange.upstream_status
                    and 200 <= exchange.upstream_status < 300
                ):
                    signs.append(Sign(exchange.received_at, exchange.upstream_at, "reversed", ref))
        return signs, writes

    # -- the bench -------------------------------------------------------------------------------

    async def prepare(self, scenario: Scenario) -> None:
        watch = _Watch()
        watch.task = asyncio.get_running_loop().create_task(self._sample(scenario, watch))
        self._watches[scenario.task_id] = watch
        if scenario.cut.fault is None:
            return
        fault = self.dispatch_proxy.add_fault(
            PROXY_MODES[scenario.cut.fault],
            method=self.dispatch.method,
            path=path_pattern(self.dispatch.url),
            match=scenario.task_id,
            apply=scenario.variant != "before_commit",
            delay_s=self.spec.timeout_s + LATE_COMMIT_AFTER_TIMEOUT_S,
        )
        self._faults[scenario.task_id] = fault.id

    async def wait_held(self, scenario: Scenario) -> None:
        async def held() -> bool:
            return any(e.held for e in self._exchanges(scenario))

        await poll(held, HELD_TIMEOUT_S, f"the write of {scenario.task_id} to be held")

    async def release(self, scenario: Scenario) -> None:
        self.dispatch_proxy.release(self._faults[scenario.task_id])

    async def wait_write_done(self, scenario: Scenario) -> None:
        async def quiet() -> bool:
            return all(e.state == "done" for e in self._exchanges(scenario))

        await poll(quiet, QUIET_TIMEOUT_S, f"{scenario.task_id} to be quiet")

    async def finish(self, scenario: Scenario) -> GroundTruth:
        fault_id = self._faults.pop(scenario.task_id, None)
        if fault_id is not None:
            self.dispatch_proxy.retire(fault_id)
        await self.wait_write_done(scenario)
        watch = self._watches.pop(scenario.task_id, _Watch())
        if watch.task is not None:
            watch.task.cancel()
            await asyncio.gather(watch.task, return_exceptions=True)
        await self._look(scenario, watch)  # one last look, once everything came to rest
        signs, writes = self.signs(scenario, watch.signs)
        return truth_from_signs(
            signs, writes, "the kind's lookup URL, polled directly, and the fault proxy's log"
        )


# -- setting up: the user's kind, one fault proxy per origin it calls, a temporary kinds file
# pointing settled at the proxies, and a stack of the drill's own that uses it ------------------


class TargetError(ValueError):
    """The target kind cannot be drilled as given; the message says why."""


def _spec(kind: str, config: Path) -> tuple[KindSpec, dict[str, Any]]:
    kinds = load_kinds(config)
    spec = kinds.get(kind)
    if spec is None:
        raise TargetError(f"{config} declares no kind {kind!r} (it has: {', '.join(kinds.names())})")
    if spec.handler is not None or spec.dispatch is None:
        raise TargetError(f"kind {kind!r} is a code kind: the drill cuts HTTP kinds, through its proxy")
    if spec.lookup is None:
        raise TargetError(f"kind {kind!r} has no lookup URL: the drill reads the ground truth through it")
    table: dict[str, Any] = tomllib.loads(config.read_text())["kinds"][kind]
    return spec, table


def _params(
    spec: KindSpec, given: dict[str, Any] | None, changed: dict[str, Any] | None
) -> tuple[dict, dict]:
    try:
        params = given or sample_params(spec.params_schema)
        after = changed or changed_params(spec.params_schema, params)
        for flag, value in (("--params", params), ("--changed-params", after)):
            try:
                validate_params(spec, value)
            except InvalidParams as error:
                raise TargetError(f"{flag} {value}: {error}") from None
    except NoSample as error:
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
        proxies = {url: await stack.enter_async_context(running_proxy(url)) for url in origins}
        text = kinds_toml({kind: rewrite(table, {url: p.url for url, p in proxies.items()})})
        parse_kinds(text, "the drill's temporary kinds file")  # fail here, not in the worker
        with console.status(f"starting the stack, with {kind} behind the fault proxy…"):
            running = await stack.enter_async_context(own_stack(text, with_sandbox=False))
        api = await stack.enter_async_context(settled_client(running.api_url))
        direct = await stack.enter_async_context(http_client())
        bench = TargetBench(spec, proxies, direct)
        task = fixed_task(kind, spec.description, params, after)
        yield Environment(
            bench, (task,), api, None, f"kind {kind} at {', '.join(origins)} behind the fault proxy"
        )
