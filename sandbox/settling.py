"""Transfers finish later: accepted `pending`, then `succeeded` or `failed` once their time has come.

The outcome and the moment are decided when the transfer commits and stored with it (`settles_at`,
`failure_reason`); the status is computed from them whenever the record is read. No timer can be lost
that way: a restarted sandbox finishes its transfers on time. The settings that decide (how long a
transfer stays pending, which amounts fail) live in memory like the faults, and a restarted or reset
sandbox comes back with the defaults.
"""

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from settled.sandbox.db import now

PENDING = "pending"
SUCCEEDED = "succeeded"
FAILED = "failed"


class TransferSettings(BaseModel):
    """How transfers committed from now on finish. Replaced whole by `PUT /_sandbox/transfers`."""

    model_config = ConfigDict(extra="forbid")

    settle_after_s: float = Field(default=1.0, ge=0)
    # A transfer of more than this fails, with `failure_reason`; anything up to it succeeds.
    fail_above: float = Field(default=10_000.0, ge=0)
    failure_reason: str = Field(default="insufficient_funds", min_length=1)


@dataclass(frozen=True)
class Settlement:
    """A transfer's fate, fixed when it commits: when it leaves `pending`, and why it fails (None:
    it succeeds)."""

    settles_at: str
    failure_reason: str | None

    @classmethod
    def decide(cls, settings: TransferSettings, payload: dict[str, Any]) -> "Settlement":
        fails = float(payload["amount"]) > settings.fail_above
        return cls(
            settles_at=now(ago_s=-settings.settle_after_s),
            failure_reason=settings.failure_reason if fails else None,
        )


def status_at(stored: str, settles_at: str | None, failure_reason: str | None, at: str) -> str:
    """The status a record has at `at`: a pending transfer whose time has come is finished."""
    if stored != PENDING or settles_at is None or settles_at > at:
        return stored
    return FAILED if failure_reason else SUCCEEDED


class FinishSpec(BaseModel):
    """`POST /_sandbox/transfers/{id}/finish`: end a pending transfer now, as decided or as said here."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["succeeded", "failed"] | None = None
    failure_reason: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _fits(self) -> "FinishSpec":
        if self.failure_reason is not None and self.outcome == SUCCEEDED:
            raise ValueError("a transfer that succeeds has no failure_reason")
        return self

    def reason(self, decided: str | None, settings: TransferSettings) -> str | None:
        """The failure reason it finishes with (None: it succeeds)."""
        if self.outcome == SUCCEEDED:
            return None
        if self.outcome == FAILED or self.failure_reason is not None:
            return self.failure_reason or decided or settings.failure_reason
        return decided
