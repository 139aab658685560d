"""The test bench a run stands on: it injects the cut's fault into the business system and, at the
end, reads the ground truth from the business system itself. Two benches: the sandbox (here: faults
through its control plane, truth from its records and request log, judged by `sandbox.truth`) and a
user's own service behind the fault proxy (`drill.target`).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
from settled.drill.plan import LATE_COMMIT_AFTER_TIMEOUT_S, Scenario
from settled.drill.stack import DRILL_TIMEOUT_S
from settled.drill.timeline import DrillTimeout
from settled.sandbox.truth import GroundTruth

HELD_TIMEOUT_S = 10.0
QUIET_TIMEOUT_S = 15.0


class Bench(Protocol):
    async def prepare(self, scenario: Scenario) -> None:
        """Install the cut's fault for this task only (and start watching it, if needed)."""

    async def wait_held(self, scenario: Scenario) -> None:
        """Until the task's write is held in flight (C5)."""

    async def release(self, scenario: Scenario) -> None:
        """Let the held write go on, applied or not as the scenario's variant says (C5)."""

    async def wait_write_done(self, scenario: Scenario) -> None:
        """Until no write for the task is in flight at the service."""

    async def finish(self, scenario: Scenario) -> GroundTruth:
        """Retire the task's faults, wait until nothing is in flight, and read the ground truth."""


# -- the sandbox bench -----------------------------------------------------------------------------

POLL_S = 0.05


async def poll(probe: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    """Until `probe` says yes. What a bench waits for lives in the service or the proxy, which announce
    nothing: it is asked again and again, within a deadline."""
    deadline = time.monotonic() + timeout_s
    while not await probe():
        if time.monotonic() > deadline:
            raise DrillTimeout(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(POLL_S)


class SandboxClient:
    """The /_sandbox control plane, over HTTP."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def add_fault(self, **spec: Any) -> str:
        response = await self.http.post("/_sandbox/faults", json=spec)
        response.raise_for_status()
        fault_id: str = response.json()["id"]
        return fault_id

    async def release(self, fault_id: str) -> None:
        """Open a fault's gate and retire it (it fires no more)."""
        (await self.http.post(f"/_sandbox/faults/{fault_id}/release")).raise_for_status()

    async def records(self, key: str) -> list[dict[str, Any]]:
        response = await self.http.get("/_sandbox/records", params={"key": key})
        response.raise_for_status()
        rows: list[dict[str, Any]] = response.json()["records"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]

    async def requests(self, key: str, op: str | None = None) -> list[dict[str, Any]]:
        params = {"key": key, **({"op": op} if op else {})}
        response = await self.http.get("/_sandbox/requests", params=params)
        response.raise_for_status()
        rows: list[dict[str, Any]] = response.json()["requests"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]


class SandboxBench:
    def __init__(self, client: SandboxClient) -> None:
        self.client = client
        self._faults: dict[str, str] = {}

    async def prepare(self, scenario: Scenario) -> None:
        mode = scenario.cut.fault
        if mode is None:
            return
        spec: dict[str, Any] = {
            "service": scenario.kind.service,
            "op": "create",
            "mode": mode,
            "match_key": scenario.task_id,
            "count": 1,
            "label": scenario.task_id,
        }
        if mode == "hold":
            spec["apply"] = scenario.variant == "after_commit"
        if mode == "late_commit":
            delay = DRILL_TIMEOUT_S + LATE_COMMIT_AFTER_TIMEOUT_S
            spec.update(mode="delay", unseen=True, delay_s=delay)
        self._faults[scenario.task_id] = await self.client.add_fault(**spec)

    async def wait_held(self, scenario: Scenario) -> None:
        async def held() -> bool:
            rows = await self.client.requests(scenario.task_id, "create")
            return any(row["state"] == "in_flight" and row.get("outcome") == "held" for row in rows)

        await poll(held, HELD_TIMEOUT_S, f"the write of {scenario.task_id} to be held")

    async def release(self, scenario: Scenario) -> None:
        await self.client.release(self._faults[scenario.task_id])

    async def _quiet(self, scenario: Scenario) -> bool:
        rows = await self.client.requests(scenario.task_id)
        return not any(row["state"] == "in_flight" for row in rows)

    async def wait_write_done(self, scenario: Scenario) -> None:
        await poll(lambda: self._quiet(scenario), QUIET_TIMEOUT_S, f"{scenario.task_id} to be quiet")

    async def finish(self, scenario: Scenario) -> GroundTruth:
        fault_id = self._faults.pop(scenario.task_id, None)
        if fault_id is not None:
            await self.client.release(fault_id)  # retires one that never fired; frees a forgotten hold
        await self.wait_write_done(scenario)
        records = await self.client.records(scenario.task_id)
        writes = await self.client.requests(scenario.task_id, "create")
        return GroundTruth.of_sandbox(records, writes)
