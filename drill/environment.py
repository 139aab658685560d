"""What a drill runs against: the bench, the tasks, and how to make each arm for a run."""

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from settled.drill.arms import Arm
from settled.drill.arms.state import StateArm
from settled.drill.arms.transcript import TranscriptArm
from settled.drill.bench import Bench
from settled.drill.runlog import RunLog
from settled.drill.sandbox import SandboxBench, SandboxClient
from settled.drill.scenario import Scenario
from settled.drill.tasks import SANDBOX_TASKS, TaskKind

HTTP_TIMEOUT_S = 40.0  # above the longest `wait` the state arm asks for
LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)


@dataclass
class Environment:
    bench: Bench
    tasks: tuple[TaskKind, ...]
    api: httpx.AsyncClient
    service: httpx.AsyncClient | None  # where the transcript arm's tool posts (None: no transcript arm)
    description: str

    async def warm_up(self, nonce: str) -> None:
        """One throwaway action per kind, cancelled before anything is sent (no business write), so
        the first measured runs do not pay for cold workflow caches and connection pools."""
        for kind in self.tasks:
            op = f"d{nonce}-warmup-{kind.label}"
            body = {"conversation_id": f"{op}.conv", "kind": kind.name, "operation_id": op}
            created = await self.api.post(
                "/v1/actions", json={**body, "params": kind.make_params(random.Random(0))}
            )
            created.raise_for_status()
            (await self.api.post(f"/v1/actions/{op}/cancel", json={"by": "drill warm-up"})).raise_for_status()
            (await self.api.get(f"/v1/conversations/{op}.conv/handoff")).raise_for_status()

    def make_arm(self, scenario: Scenario, log: RunLog) -> Arm:
        if scenario.arm == "state":
            return StateArm(scenario, log, self.api)
        if self.service is None:
            raise ValueError("the transcript arm needs the sandbox business services")
        return TranscriptArm(scenario, log, self.service)


@asynccontextmanager
async def sandbox_environment(api_url: str, sandbox_url: str, description: str) -> AsyncIterator[Environment]:
    async with (
        httpx.AsyncClient(base_url=api_url, timeout=HTTP_TIMEOUT_S, limits=LIMITS) as api,
        httpx.AsyncClient(base_url=sandbox_url, timeout=HTTP_TIMEOUT_S, limits=LIMITS) as service,
    ):
        bench = SandboxBench(SandboxClient(service))
        yield Environment(bench, SANDBOX_TASKS, api, service, description)
