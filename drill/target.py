"""`--target-kind`: the state arm's cuts against a user's own (staging) service.

settled reaches the service through a fault proxy per origin (its URLs rewritten in a temporary
kinds file); the proxy plays the sandbox's faults. Ground truth never comes from settled: the
kind's lookup URL is polled directly for the task's operation key, and the proxy's log says which
writes reached the service and what the service answered to each.
"""

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from settled.drill.bench import HELD_TIMEOUT_S, QUIET_TIMEOUT_S
from settled.drill.cuts import LATE_COMMIT_AFTER_TIMEOUT_S
from settled.drill.proxy import Exchange, FaultProxy, ProxyMode
from settled.drill.runlog import DrillTimeout
from settled.drill.scenario import Scenario
from settled.drill.signs import Sign, truth_from_signs
from settled.drill.timeline import now
from settled.sandbox.truth import GroundTruth, Write

from settled.kinds import HttpCall, KindSpec
from settled.templates import lookup_path, render

SAMPLE_EVERY_S = 0.05
POLL_S = 0.05
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
        if spec.lookup is None:
            raise ValueError(f"kind {spec.name} has no lookup URL: the drill needs one for ground truth")
        self.spec = spec
        self.lookup = spec.lookup
        self.proxies = proxies
        self.direct = direct
        self.dispatch_proxy = proxies[origin(spec.dispatch.url)]
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
            if _calls(self.spec.dispatch, exchange) and 200 <= exchange.upstream_status < 300:
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
            if _calls(self.spec.dispatch, exchange) and exchange.forwarded:
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
            method=self.spec.dispatch.method,
            path=path_pattern(self.spec.dispatch.url),
            match=scenario.task_id,
            apply=scenario.variant != "before_commit",
            delay_s=self.spec.timeout_s + LATE_COMMIT_AFTER_TIMEOUT_S,
        )
        self._faults[scenario.task_id] = fault.id

    async def _poll(self, probe: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not probe():
            if time.monotonic() > deadline:
                raise DrillTimeout(f"timed out after {timeout_s:g}s waiting for {what}")
            await asyncio.sleep(POLL_S)

    async def wait_held(self, scenario: Scenario) -> None:
        def held() -> bool:
            return any(e.held for e in self._exchanges(scenario))

        await self._poll(held, HELD_TIMEOUT_S, f"the write of {scenario.task_id} to be held")

    async def release(self, scenario: Scenario) -> None:
        self.dispatch_proxy.release(self._faults[scenario.task_id])

    async def wait_write_done(self, scenario: Scenario) -> None:
        def quiet() -> bool:
            return all(e.state == "done" for e in self._exchanges(scenario))

        await self._poll(quiet, QUIET_TIMEOUT_S, f"{scenario.task_id} to be quiet")

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
