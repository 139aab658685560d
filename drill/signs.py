"""Ground truth for a service the drill does not own: only what the service itself said.

A sign is one answer of the service about the task: a 2xx to a write (seen by the proxy even when
the client never got it), a lookup (the drill's own, or settled's through the proxy), a successful
compensation. Each has the time the question left and the time the answer arrived, so an answer
that was already under way when the record was made cannot be misread as the record vanishing.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from settled.sandbox.truth import GroundTruth, Record, Write

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
