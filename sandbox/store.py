"""Records and the idempotency store, which change together: a keyed creation commits the record and
the response to replay in one transaction, so no crash can leave one without the other."""

import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from settled.sandbox.db import Database, now
from settled.sandbox.services import ServiceSpec
from settled.sandbox.settling import PENDING, SUCCEEDED, Settlement, status_at


def commit_time(row: Mapping[str, Any]) -> str:
    """When a record (a row of the ground-truth view) became visible: its `committed_at`. A sandbox
    killed between COMMIT and that stamp leaves none: `created_at`, taken inside the transaction, is
    the nearest there is. Every judge of the records reads commit time through this."""
    return str(row.get("committed_at") or row["created_at"])


def effective_time(row: Mapping[str, Any]) -> str | None:
    """When a record's write took effect: its commit; for a service that finishes later (a row with
    `effective_at`, a transfer), when it succeeded, and None while it is pending or once it failed or
    was cancelled before finishing: accepted is not done."""
    if "effective_at" not in row:
        return commit_time(row)
    effective = row["effective_at"]
    return None if effective is None else max(commit_time(row), str(effective))


@dataclass(frozen=True)
class Record:
    service: str
    id: str
    key: str | None
    client_reference: str | None
    payload: dict[str, Any]
    status: str
    created_at: str
    committed_at: str | None
    cancelled_at: str | None
    # Set for a service that finishes later: when it leaves `pending`, and why it fails (None: succeeds).
    settles_at: str | None = None
    failure_reason: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Record":
        return cls(
            service=row["service"],
            id=row["id"],
            key=row["key"],
            client_reference=row["client_reference"],
            payload=json.loads(row["payload"]),
            status=row["status"],
            created_at=row["created_at"],
            committed_at=row["committed_at"],
            cancelled_at=row["cancelled_at"],
            settles_at=row["settles_at"],
            failure_reason=row["failure_reason"],
        )

    def status_at(self, at: str | None = None) -> str:
        """The status at `at` (default now): a transfer whose time has come has finished."""
        return status_at(self.status, self.settles_at, self.failure_reason, at or now())

    def ground_truth(self, at: str | None = None) -> dict[str, Any]:
        at = at or now()
        status = self.status_at(at)
        row = {
            "service": self.service,
            "id": self.id,
            "key": self.key,
            "client_reference": self.client_reference,
            "payload": self.payload,
            "status": status,
            "created_at": self.created_at,
            "committed_at": self.committed_at,
            "cancelled_at": self.cancelled_at,
        }
        if self.settles_at is not None:
            finished = status != self.status
            row["settles_at"] = self.settles_at
            row["failure_reason"] = self.failure_reason if finished else None
            # When the write took effect (`effective_time`): only a transfer that succeeded ever did.
            row["effective_at"] = self.settles_at if status == SUCCEEDED else None
        return row

    def view(self, spec: ServiceSpec, at: str | None = None) -> dict[str, Any]:
        """The record as the business API shows it (at `at`, default now: a lagging replica's past)."""
        return self.shown(spec, self.status_at(at))

    def shown(self, spec: ServiceSpec, status: str) -> dict[str, Any]:
        """The record as the business API shows it with this status (the stored one: as created)."""
        shown = {"id": self.id, **spec.fields(self.payload), "status": status}
        if spec.finishes_later:
            shown["failure_reason"] = self.failure_reason if status != self.status else None
        return {**shown, "client_reference": self.client_reference}


@dataclass(frozen=True)
class Claim:
    """What the idempotency store says about a key when a create request arrives."""

    verdict: Literal["claimed", "replay", "in_flight", "reused"]
    token: str | None = None
    status: int | None = None
    body: dict[str, Any] | None = None


def fingerprint(body: Any) -> str:
    """Canonical JSON, so key order and spacing do not make a retry look like a different request."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Store:
    def __init__(self, db: Database) -> None:
        self._db = db

    def forget_unfinished(self) -> None:
        """Drop claims left by a process that died mid-request: nothing was applied for them (a record
        and its stored response commit together), so the key must be usable again."""
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM idempotency WHERE state = 'in_flight'")

    def claim(self, service: str, key: str, print_: str) -> Claim:
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT fingerprint, state, status, body FROM idempotency WHERE service = ? AND key = ?",
                (service, key),
            ).fetchone()
            if row is None:
                token = uuid.uuid4().hex
                conn.execute(
                    "INSERT INTO idempotency (service, key, fingerprint, state, claim, created_at)"
                    " VALUES (?, ?, ?, 'in_flight', ?, ?)",
                    (service, key, print_, token, now()),
                )
                return Claim("claimed", token=token)
        # A different body is a client bug whatever the first request's state, so it is checked first.
        if row["fingerprint"] != print_:
            return Claim("reused")
        if row["state"] == "in_flight":
            return Claim("in_flight")
        return Claim("replay", status=row["status"], body=json.loads(row["body"]))

    def release(self, service: str, key: str, token: str) -> None:
        """Give up a claim without applying; the token keeps a stale request from freeing a newer claim."""
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM idempotency WHERE service = ? AND key = ? AND state = 'in_flight' AND claim = ?",
                (service, key, token),
            )

    def create(
        self,
        spec: ServiceSpec,
        payload: dict[str, Any],
        client_reference: str | None,
        key: str | None = None,
        token: str | None = None,
        settlement: Settlement | None = None,
    ) -> tuple[Record, dict[str, Any]]:
        """Commit a new record (and, when keyed, the response to replay); returns it and its view.
        A record of a service that finishes later commits `pending` with its `settlement`."""
        with self._db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO counters (service, last) VALUES (?, 1)"
                " ON CONFLICT (service) DO UPDATE SET last = last + 1 RETURNING last",
                (spec.name,),
            ).fetchone()
            record = Record(
                service=spec.name,
                id=f"{spec.id_prefix}-{row['last']}",
                key=key,
                client_reference=client_reference,
                payload=payload,
                status=spec.created_status,
                created_at=now(),
                committed_at=None,
                cancelled_at=None,
                settles_at=settlement.settles_at if settlement else None,
                failure_reason=settlement.failure_reason if settlement else None,
            )
            conn.execute(
                "INSERT INTO records (service, id, key, client_reference, payload, status, created_at,"
                " settles_at, failure_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.service,
                    record.id,
                    record.key,
                    record.client_reference,
                    json.dumps(payload),
                    record.status,
                    record.created_at,
                    record.settles_at,
                    record.failure_reason,
                ),
            )
            # What the create answers, however soon the record finishes: accepted is not done.
            body = record.shown(spec, record.status)
            if key is not None:
                stored = conn.execute(
                    "UPDATE idempotency SET state = 'done', claim = NULL, status = ?, body = ?"
                    " WHERE service = ? AND key = ? AND state = 'in_flight' AND claim = ?",
                    (spec.created_http, json.dumps(body), spec.name, key, token),
                )
                if stored.rowcount != 1:
                    # Rolls the record back too: a keyed record must never exist without its replay.
                    raise RuntimeError(f"idempotency claim for {key!r} was lost before the record committed")
        return self._stamp_committed(record), body

    def _stamp_committed(self, record: Record) -> Record:
        """Note when the record became visible: `created_at` is taken inside the transaction, before
        COMMIT; this is taken after it, and before anyone can be answered about the record (no await
        in between), so a claim received at t is true if `committed_at` <= t."""
        committed_at = now()
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE records SET committed_at = ? WHERE service = ? AND id = ?",
                (committed_at, record.service, record.id),
            )
        return replace(record, committed_at=committed_at)

    def get(self, service: str, record_id: str) -> Record | None:
        rows = self._db.query("SELECT * FROM records WHERE service = ? AND id = ?", (service, record_id))
        return Record.from_row(rows[0]) if rows else None

    def find(self, service: str, key: str) -> Record | None:
        """The record made with this Idempotency-Key, else the first one carrying it as client_reference."""
        rows = self._db.query(
            "SELECT * FROM records WHERE service = ? AND (key = ? OR client_reference = ?)"
            " ORDER BY key IS NOT ? , seq LIMIT 1",
            (service, key, key, key),
        )
        return Record.from_row(rows[0]) if rows else None

    def cancel(self, spec: ServiceSpec, record_id: str) -> tuple[Record | None, bool]:
        """Cancel a record; returns it and whether this call changed it (False if it already was, or,
        for a service that finishes later, if it is no longer pending)."""
        at = now()
        still_pending = " AND status = 'pending' AND settles_at > ?" if spec.finishes_later else ""
        with self._db.transaction() as conn:
            changed = conn.execute(
                "UPDATE records SET status = ?, cancelled_at = ?"
                " WHERE service = ? AND id = ? AND status != ?" + still_pending,
                (spec.cancelled_status, at, spec.name, record_id, spec.cancelled_status)
                + ((at,) if spec.finishes_later else ()),
            ).rowcount
            row = conn.execute(
                "SELECT * FROM records WHERE service = ? AND id = ?", (spec.name, record_id)
            ).fetchone()
        return (Record.from_row(row) if row else None), changed == 1

    def finish(
        self, service: str, record_id: str, reason: Callable[[str | None], str | None]
    ) -> tuple[Record | None, bool]:
        """End a pending record now, failing with `reason(decided reason)` or succeeding on None;
        returns it and whether this call finished it (False if it was no longer pending)."""
        at = now()
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM records WHERE service = ? AND id = ?", (service, record_id)
            ).fetchone()
            if row is None:
                return None, False
            record = Record.from_row(row)
            if record.settles_at is None or record.status_at(at) != PENDING:
                return record, False
            record = replace(record, settles_at=at, failure_reason=reason(record.failure_reason))
            conn.execute(
                "UPDATE records SET settles_at = ?, failure_reason = ? WHERE service = ? AND id = ?",
                (record.settles_at, record.failure_reason, service, record_id),
            )
        return record, True

    def records(self, service: str | None = None, key: str | None = None) -> list[Record]:
        sql, params = "SELECT * FROM records WHERE 1 = 1", []
        if service:
            sql += " AND service = ?"
            params.append(service)
        if key:
            sql += " AND (key = ? OR client_reference = ?)"
            params += [key, key]
        return [Record.from_row(row) for row in self._db.query(sql + " ORDER BY seq", params)]
