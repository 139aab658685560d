"""The test bench a run stands on: it injects the cut's fault into the business system and, at the
end, reads the ground truth from the business system itself. Two benches: the sandbox
(`drill.sandbox`) and a user's own service behind the fault proxy (`drill.target`)."""

from typing import Protocol

from settled.drill.scenario import Scenario
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
