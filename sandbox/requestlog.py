"""Every request to a business route, persisted in arrival order: what reached the service and what
became of it. Tests and drills read it to count writes and to wait for a request to be held."""

from dataclasses import dataclass
from typing import Any

from settled.sandbox.db import Database, now


@dataclass(frozen=True)
class LoggedCall:
    seq: int
    generation: int
    service: str
    op: str


class RequestLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    def forget_unfinished(self) -> None:
        """Close rows a killed process left in flight; their answer was never sent."""
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE requests SET state = 'done', outcome = 'interrupted', finished_at = ?"
                " WHERE state = 'in_flight'",
                (now(),),
            )

    def start(
        self,
        service: str,
        op: str,
        method: str,
        path: str,
        key: str | None,
        client_reference: str | None,
        traceparent: str | None = None,
    ) -> LoggedCall:
        """`traceparent`: the W3C trace context the request carried, as a real service's logs keep it."""
        with self._db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO requests"
                " (service, op, method, path, key, client_reference, traceparent, received_at, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'in_flight') RETURNING seq",
                (service, op, method, path, key, client_reference, traceparent, now()),
            ).fetchone()
        return LoggedCall(seq=row["seq"], generation=self._db.generation, service=service, op=op)

    def note(self, call: LoggedCall, outcome: str | None = None, fault: str | None = None) -> None:
        """Record progress while still in flight (e.g. "held"), so tests can wait on it."""
        if call.generation != self._db.generation:
            return
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE requests SET outcome = ?, fault = COALESCE(?, fault) WHERE seq = ?",
                (outcome, fault, call.seq),
            )

    def finish(self, call: LoggedCall, outcome: str, status: int | None) -> None:
        # After a reset the row is gone and its seq may belong to a new request: leave that one alone.
        if call.generation != self._db.generation:
            return
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE requests SET state = 'done', outcome = ?, status = ?, finished_at = ? WHERE seq = ?",
                (outcome, status, now(), call.seq),
            )

    def rows(
        self, service: str | None = None, op: str | None = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM requests WHERE 1 = 1", []
        for column, value in (("service", service), ("op", op)):
            if value:
                sql += f" AND {column} = ?"
                params.append(value)
        if key:
            sql += " AND (key = ? OR client_reference = ?)"
            params += [key, key]
        return [dict(row) for row in self._db.query(sql + " ORDER BY seq", params)]

    def writes_in_flight(self, service: str, key: str) -> list[int]:
        """The creates for this key (or client reference) being processed right now, by seq."""
        rows = self._db.query(
            "SELECT seq FROM requests WHERE service = ? AND op = 'create' AND state = 'in_flight'"
            " AND (key = ? OR client_reference = ?)",
            [service, key, key],
        )
        return [row["seq"] for row in rows]
