"""Checking what settled said against the sandbox's records, Jepsen-style.

Every answer the API gave is an `Observation` with the wall-clock interval in which it was computed
(sent .. received). The sandbox's records carry `committed_at` (an upper bound of the commit: taken
after COMMIT, before anyone is answered) and `cancelled_at` (a lower bound of the reversal). So:

- `done` is true when returned if a record for the operation key committed before it was received
  (and, when the answer names a `business_ref`, that very record);
- `not_done` is false when returned if a record had committed before it was asked for and was not
  reversed until after it was received;
- the final state must match the records, and no operation key may have two records.

`in_progress` and `unknown` claim nothing, so they are never violations.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from settled.sandbox.store import commit_time

SETTLED_STATES = frozenset({"confirmed", "failed", "cancelled"})


def epoch(stamp: str) -> float:
    """Seconds since the epoch of the sandbox's RFC 3339 UTC stamps."""
    return datetime.fromisoformat(stamp).timestamp()


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
class Record:
    """A sandbox record, by its operation key (the Idempotency-Key, else the client reference)."""

    key: str
    service: str
    id: str
    committed: float
    reversed: float | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Record | None":
        key = row.get("key") or row.get("client_reference")
        if not key:
            return None  # made by hand, not by settled
        cancelled = row.get("cancelled_at")
        return cls(
            key=key,
            service=row["service"],
            id=row["id"],
            committed=epoch(commit_time(row)),
            reversed=epoch(cancelled) if cancelled else None,
        )


def records_by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Record]]:
    grouped: dict[str, list[Record]] = defaultdict(list)
    for row in rows:
        record = Record.of(row)
        if record is not None:
            grouped[record.key].append(record)
    return dict(grouped)


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
        committed = [r for r in records if r.committed <= seen.received]
        if seen.business_ref is not None:
            committed = [r for r in committed if r.id == seen.business_ref]
        if not committed:
            detail = (
                f"{seen.route} said done (ref {seen.business_ref}) but no such record had committed by then;"
                f" records: {[(r.id, r.committed) for r in records]}"
            )
            return Violation("false_done", seen.operation_id, detail, seen.received)
    elif seen.claim == "not_done":
        standing = [
            r
            for r in records
            if r.committed <= seen.sent and (r.reversed is None or r.reversed >= seen.received)
        ]
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
        seen.claim == "done"
        and seen.cancel_requested
        and any(r.reversed is not None and r.reversed < seen.sent for r in records)
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
    standing = [r for r in records if r.reversed is None]
    reversed_ = [r for r in records if r.reversed is not None]
    if state not in SETTLED_STATES:
        return Violation("unsettled", op, f"still {state} at the end ({status.get('reason')})")
    if state == "confirmed":
        ok = len(standing) == 1 and status.get("business_ref") in (None, standing[0].id)
        want = "one standing record with its business_ref"
    elif state == "cancelled" and status.get("compensated"):
        ok = len(reversed_) == 1 and not standing
        want = "one reversed record"
    else:
        ok = not records
        want = "no record"
    if ok:
        return None
    have = [(r.id, "reversed" if r.reversed else "standing") for r in records]
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
