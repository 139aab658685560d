"""Ground truth: what the business system holds for one task, from its own records and request log.

Never from what an arm believes. Truth at time t is whether an applied, not-cancelled record for the
task existed at t (commit time `committed_at`, reversal time `cancelled_at`), the soak's rule too.
"""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class Record(BaseModel):
    id: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: str = "applied"
    committed_at: datetime  # when the record became visible to anyone asking
    cancelled_at: datetime | None = None

    def stands_at(self, at: datetime) -> bool:
        return self.committed_at <= at and (self.cancelled_at is None or at < self.cancelled_at)


class Write(BaseModel):
    """A write request that reached the service for the task."""

    received_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None
    status: int | None = None


class GroundTruth(BaseModel):
    records: list[Record] = Field(default_factory=list)
    writes: list[Write] = Field(default_factory=list)
    source: str = "sandbox"  # where it came from: the sandbox's ledger, or a lookup URL and the proxy

    def standing_at(self, at: datetime) -> bool:
        return any(record.stands_at(at) for record in self.records)

    def appears_after(self, at: datetime) -> bool:
        return any(record.committed_at > at for record in self.records)
