"""Injected faults: a registry consulted once per business request, and the gates that held,
hanging and delayed requests wait on.

Faults live in memory only: they steer the live process a test or drill is talking to, and a
restarted sandbox should come back healthy.
"""

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from settled.sandbox.services import Op, ServiceName

Mode = Literal[
    "delay", "drop_after_apply", "fail_before_apply", "error_after_apply", "hang", "hold", "reject", "stale",
    "unauthorized",
]  # fmt: skip
# How a gate was opened: per the fault's `apply` (release), as if there were no fault (clear), or
# give up without applying (reset, shutdown).
Verdict = Literal["as_configured", "proceed", "abort"]

DEFAULT_STATUS: dict[str, int] = {
    "fail_before_apply": 503,
    "error_after_apply": 500,
    "reject": 422,
    # Refuses the request's credentials and, as careless services do, quotes them back in the error.
    "unauthorized": 401,
    "hold": 503,
}
# For `stale` (lookups only), delay_s is the replica's lag: what committed since then is not seen.
DEFAULT_DELAY_S: dict[str, float] = {"delay": 1.0, "hang": 3600.0, "stale": 2.0}
DEFAULT_APPLY: dict[str, bool] = {"hold": True, "hang": False}


class FaultSpec(BaseModel):
    # A misspelt field (say "key" for "match_key") would silently widen the fault: refuse it.
    model_config = ConfigDict(extra="forbid")

    service: ServiceName
    op: Op
    mode: Mode
    count: int = Field(default=1, ge=0)
    delay_s: float | None = Field(default=None, ge=0)
    status: int | None = Field(default=None, ge=100, le=599)
    match_key: str | None = None
    apply: bool | None = None
    label: str | None = None
    # A write that lookups cannot see until it commits (a queue, another node still processing it):
    # they answer 404, as a real service's lookup may, instead of 409 "in progress".
    unseen: bool = False

    @model_validator(mode="after")
    def _fits(self) -> "FaultSpec":
        if self.mode == "stale" and self.op != "lookup":
            raise ValueError("mode 'stale' (a lagging replica) is for op 'lookup'")
        if self.unseen and (self.op != "create" or self.mode not in ("delay", "hold")):
            raise ValueError("unseen is for a delayed or held create")
        return self


class Gate:
    """Where requests caught by one fault wait; opened once, for all of them and any that come later."""

    def __init__(self) -> None:
        self._opened = asyncio.Event()
        self.verdict: Verdict | None = None
        self.waiting = 0

    def open(self, verdict: Verdict) -> int:
        """Open the gate; returns how many requests it let go."""
        if self.verdict is not None:
            return 0
        self.verdict = verdict
        self._opened.set()
        return self.waiting

    async def wait(self, timeout_s: float | None = None) -> Verdict | None:
        """The verdict, or None if `timeout_s` passed first."""
        self.waiting += 1
        try:
            async with asyncio.timeout(timeout_s):
                await self._opened.wait()
        except TimeoutError:
            return None
        finally:
            self.waiting -= 1
        return self.verdict


@dataclass
class Fault:
    id: str
    spec: FaultSpec
    fired: int = 0
    retired: bool = False
    gate: Gate = field(default_factory=Gate)

    @property
    def mode(self) -> Mode:
        return self.spec.mode

    @property
    def status(self) -> int:
        return self.spec.status or DEFAULT_STATUS.get(self.mode, 503)

    @property
    def delay_s(self) -> float:
        return self.spec.delay_s if self.spec.delay_s is not None else DEFAULT_DELAY_S.get(self.mode, 0.0)

    @property
    def apply(self) -> bool:
        return self.spec.apply if self.spec.apply is not None else DEFAULT_APPLY.get(self.mode, False)

    @property
    def exhausted(self) -> bool:
        return self.spec.count > 0 and self.fired >= self.spec.count

    @property
    def active(self) -> bool:
        return not self.retired and (not self.exhausted or self.gate.waiting > 0)

    def matches(self, service: str, op: str, identity: Iterable[str]) -> bool:
        spec = self.spec
        return (
            spec.service == service
            and spec.op == op
            and (spec.match_key is None or spec.match_key in set(identity))
        )

    def as_json(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "id": self.id,
            "service": spec.service,
            "op": spec.op,
            "mode": spec.mode,
            "count": spec.count,
            "delay_s": self.delay_s if self.mode in DEFAULT_DELAY_S else spec.delay_s,
            "status": self.status if self.mode in DEFAULT_STATUS else spec.status,
            "match_key": spec.match_key,
            "apply": self.apply if self.mode in DEFAULT_APPLY else spec.apply,
            "label": spec.label,
            "unseen": spec.unseen,
            "fired": self.fired,
            "remaining": None if spec.count == 0 else max(spec.count - self.fired, 0),
            "held": self.gate.waiting,
            "active": self.active,
        }


class FaultRegistry:
    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}
        self._next_id = 1

    def add(self, spec: FaultSpec) -> Fault:
        fault = Fault(id=f"f-{self._next_id}", spec=spec)
        self._next_id += 1
        self._faults[fault.id] = fault
        return fault

    def take(self, service: str, op: str, identity: Iterable[str]) -> Fault | None:
        """The first live fault (in insertion order) matching this request, counted as fired."""
        wanted = list(identity)
        for fault in self._faults.values():
            if not fault.retired and not fault.exhausted and fault.matches(service, op, wanted):
                fault.fired += 1
                return fault
        return None

    def get(self, fault_id: str) -> Fault | None:
        return self._faults.get(fault_id)

    def active(self) -> list[Fault]:
        return [fault for fault in self._faults.values() if fault.active]

    def release(self, fault: Fault) -> int:
        """Let the requests this fault holds go on (applied or not, per the fault); it fires no more."""
        fault.retired = True
        return fault.gate.open("as_configured")

    def release_all(self) -> int:
        return sum(self.release(fault) for fault in self._faults.values())

    def clear(self) -> tuple[int, int]:
        """Remove every fault; held requests go on as if never faulted. Returns (faults, released)."""
        cleared = len(self.active())
        released = sum(fault.gate.open("proceed") for fault in self._faults.values())
        self._faults.clear()
        return cleared, released

    def abort(self) -> int:
        """Wake every waiting request to give up without applying (reset, shutdown)."""
        return sum(fault.gate.open("abort") for fault in self._faults.values())

    def reset(self) -> None:
        self.abort()
        self._faults.clear()
        self._next_id = 1
