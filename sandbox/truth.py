"""Judging what was said against the business records: the one judge of the drill, the soak and the
crash tests.

A record stands from its commit (`committed_at`, through `store.commit_time`: an upper bound of the
commit, taken after COMMIT and before anyone is answered) until its reversal (`cancelled_at`, a lower
bound). Every claim is judged against that, never against what the speaker believed:

A write the service accepted and finishes later (a transfer) stands only from when it succeeded
(`store.effective_time`); one still pending, failed, or cancelled while pending never stood.

- at one moment (the drill, whose timeline stamps each sentence as it starts): `done` is true only
  while a record stands, `not_done` only while none does (`GroundTruth`);
- over the interval in which an answer was computed (the soak, Jepsen-style, sent .. received):
  `done` is false if no record (the one it names, if it names one) had committed before it was
  received; `not_done` is false if a record had committed before it was asked for and was not
  reversed until after it was received. `in_progress` and `unknown` claim nothing. The final state
  must match the records, and no operation key may have two records (`judge`).

Times are datetimes, or seconds since the epoch (the soak's wall clock); both compare exactly.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from settled.sandbox.store import commit_time, effective_time

SETTLED_STATES = frozenset({"confirmed", "failed", "cancelled"})
Instant = datetime | float  # a datetime, or seconds since the epoch


def _seconds(at: Instant) -> float:
    return at.timestamp() if isinstance(at, datetime) else at


class Record(BaseModel):
    """One business record of a task, with when it became visible and when it was reversed."""

    id: str
    payload: dict[str, Any] = Field(default_factory=dict)
    status: str = "applied"
    committed_at: datetime  # when the record became visible to anyone asking (and took effect)
    cancelled_at: datetime | None = None
    # False for a write accepted and not finished, or ended without taking effect (a transfer pending,
    # failed, or cancelled while pending): it never stood, though it counts as a write for duplicates.
    applied: bool = True

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Record":
        """From a row of the sandbox's ground-truth view (`/_sandbox/records`)."""
        effective = effective_time(row)
        return cls(
            id=row["id"],
            payload=row.get("payload") or {},
            status=row.get("status") or "applied",
            committed_at=effective or commit_time(row),
            cancelled_at=row.get("cancelled_at"),
            applied=effective is not None,
        )

    @property
    def committed(self) -> float:
        return self.committed_at.timestamp()

    @property
    def reversed(self) -> float | None:
        return None if self.cancelled_at is None else self.cancelled_at.timestamp()

    def committed_by(self, at: Instant) -> bool:
        return self.applied and self.committed <= _seconds(at)

    def reversed_before(self, at: Instant) -> bool:
        return self.applied and self.reversed is not None and self.reversed < _seconds(at)

    def stands_at(self, at: Instant) -> bool:
        return self.committed_by(at) and not (self.reversed is not None and self.reversed <= _seconds(at))

    def stood_throughout(self, start: Instant, end: Instant) -> bool:
        """Committed before `start` and not reversed before `end`."""
        return self.committed_by(start) and not self.reversed_before(end)


class Write(BaseModel):
    """A write request that reached the service for the task."""

    received_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None
    status: int | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Write":
        """From a row of the sandbox's request log (`/_sandbox/requests`)."""
        return cls(
            received_at=row["received_at"],
            finished_at=row.get("finished_at"),
            outcome=row.get("outcome"),
            status=row.get("status"),
        )


class GroundTruth(BaseModel):
    """What the business system holds for one task: its records and the writes that reached it."""

    records: list[Record] = Field(default_factory=list)
    writes: list[Write] = Field(default_factory=list)
    source: str = "sandbox"  # where it came from: the sandbox's ledger, or a lookup URL and the proxy

    @classmethod
    def of_sandbox(
        cls, records: Iterable[Mapping[str, Any]], writes: Iterable[Mapping[str, Any]]
    ) -> "GroundTruth":
        return cls(
            records=[Record.of(row) for row in records],
            writes=[Write.of(row) for row in writes],
            source="sandbox records and request log",
        )

    def standing_at(self, at: Instant) -> bool:
        return any(record.stands_at(at) for record in self.records)

    def appears_after(self, at: Instant) -> bool:
        return any(record.applied and not record.committed_by(at) for record in self.records)

    def claim_is_true(self, claim: str, at: Instant) -> bool:
        """A definitive claim at one moment: `done` while a record stands, `not_done` while none does."""
        standing = self.standing_at(at)
        return standing if claim == "done" else not standing


# -- the soak's judge: every answer over the interval in which it was computed -------------------


def operation_key(row: Mapping[str, Any]) -> str | None:
    """A record's operation key: the Idempotency-Key, else the client reference (None: made by hand)."""
    key = row.get("key") or row.get("client_reference")
    return str(key) if key else None


def records_by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Record]]:
    grouped: dict[str, list[Record]] = defaultdict(list)
    for row in rows:
        key = operation_key(row)
        if key is not None:
            grouped[key].append(Record.of(row))
    return dict(grouped)


@dataclass(frozen=True)
class Observation:
    """One ActionStatus the API returned, and when (wall clock, seconds since the epoch)."""

    operation_id: str
    sent: float
    received: float
    route: str
    state: str
    claim: str
    business_ref: str | None
    cancel_requested: bool
    compensated: bool
    say: str

    @classmethod
    def of(cls, status: Mapping[str, Any], sent: float, received: float, route: str) -> "Observation":
        return cls(
            operation_id=status["operation_id"],
            sent=sent,
            received=received,
            route=route,
            state=status["state"],
            claim=status["claim"],
            business_ref=status.get("business_ref"),
            cancel_requested=bool(status.get("cancel_requested")),
            compensated=bool(status.get("compensated")),
            say=status.get("say", ""),
        )


@dataclass(frozen=True)
class Violation:
    kind: str  # false_done | false_not_done | duplicate | final_mismatch | unsettled
    operation_id: str
    detail: str
    at: float | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _claim_violation(seen: Observation, records: list[Record]) -> Violation | None:
    if seen.claim == "done":
        committed = [r for r in records if r.committed_by(seen.received)]
        if seen.business_ref is not None:
            committed = [r for r in committed if r.id == seen.business_ref]
        if not committed:
            detail = (
                f"{seen.route} said done (ref {seen.business_ref}) but no such record had committed by then;"
                f" records: {[(r.id, r.committed) for r in records]}"
            )
            return Violation("false_done", seen.operation_id, detail, seen.received)
    elif seen.claim == "not_done":
        standing = [r for r in records if r.stood_throughout(seen.sent, seen.received)]
        if standing:
            detail = (
                f"{seen.route} said not_done ({seen.state}) while record {standing[0].id} stood"
                f" (committed {standing[0].committed:.6f}, reversed {standing[0].reversed})"
            )
            return Violation("false_not_done", seen.operation_id, detail, seen.received)
    return None


def stale_done_while_reversing(seen: Observation, records: list[Record]) -> bool:
    """A `done` received after the reversal the caller asked for began committing: the compensation's
    answer had not reached settled yet. Counted apart, not a violation: the action still said
    `cancel_requested`, and the next answer said `cancelled`."""
    return (
        seen.claim == "done" and seen.cancel_requested and any(r.reversed_before(seen.sent) for r in records)
    )


def claim_violations(
    observations: Iterable[Observation], records: Mapping[str, list[Record]]
) -> list[Violation]:
    found = []
    for seen in observations:
        violation = _claim_violation(seen, records.get(seen.operation_id, []))
        if violation is not None:
            found.append(violation)
    return found


def duplicate_violations(records: Mapping[str, list[Record]]) -> list[Violation]:
    return [
        Violation("duplicate", key, f"{len(rows)} records: {[r.id for r in rows]}")
        for key, rows in records.items()
        if len(rows) > 1
    ]


def final_violation(status: Mapping[str, Any], records: list[Record]) -> Violation | None:
    """The settled state must say what the records say (docs/reference.md)."""
    op, state = status["operation_id"], status["state"]
    # A write that never took effect (a failed transfer) is no record here: `failed` is then right.
    applied = [r for r in records if r.applied]
    standing = [r for r in applied if r.reversed is None]
    reversed_ = [r for r in applied if r.reversed is not None]
    if state not in SETTLED_STATES:
        return Violation("unsettled", op, f"still {state} at the end ({status.get('reason')})")
    if state == "confirmed":
        ok = len(standing) == 1 and status.get("business_ref") in (None, standing[0].id)
        want = "one standing record with its business_ref"
    elif state == "cancelled" and status.get("compensated"):
        ok = len(reversed_) == 1 and not standing
        want = "one reversed record"
    else:
        ok = not applied
        want = "no record"
    if ok:
        return None
    have = [
        (r.id, "reversed" if r.reversed else "standing") if r.applied else (r.id, r.status) for r in records
    ]
    detail = f"{state} (compensated={status.get('compensated')}) wants {want}; records: {have}"
    return Violation("final_mismatch", op, detail)


def final_violations(
    statuses: Iterable[Mapping[str, Any]], records: Mapping[str, list[Record]]
) -> list[Violation]:
    found = []
    for status in statuses:
        violation = final_violation(status, records.get(status["operation_id"], []))
        if violation is not None:
            found.append(violation)
    return found


@dataclass
class Verdict:
    violations: list[Violation]
    stale_done_while_reversing: int
    claims: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations


def judge(
    observations: list[Observation],
    final: Iterable[Mapping[str, Any]],
    rows: Iterable[Mapping[str, Any]],
    operation_ids: Iterable[str] | None = None,
) -> Verdict:
    """Everything above at once; `operation_ids` limits the records looked at (a shared sandbox)."""
    records = records_by_key(rows)
    if operation_ids is not None:
        wanted = set(operation_ids)
        records = {key: rows for key, rows in records.items() if key in wanted}
    violations = [
        *claim_violations(observations, records),
        *duplicate_violations(records),
        *final_violations(final, records),
    ]
    stale = sum(stale_done_while_reversing(o, records.get(o.operation_id, [])) for o in observations)
    return Verdict(violations, stale, dict(Counter(o.claim for o in observations)))
