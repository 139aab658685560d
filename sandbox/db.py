"""The sandbox's SQLite database: one connection, one lock, explicit transactions.

Every call is a short local read or write, so the routes run them directly on the event loop:
each one is then atomic with respect to every other request, which is what the idempotency
store needs (two concurrent POSTs with one key must not both create a record).
"""

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (
    service TEXT PRIMARY KEY,
    last INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL,
    id TEXT NOT NULL,
    key TEXT,
    client_reference TEXT,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    committed_at TEXT,
    cancelled_at TEXT,
    settles_at TEXT,
    failure_reason TEXT,
    UNIQUE (service, id)
);
CREATE INDEX IF NOT EXISTS records_by_key ON records (service, key);
CREATE INDEX IF NOT EXISTS records_by_reference ON records (service, client_reference);
CREATE TABLE IF NOT EXISTS idempotency (
    service TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,
    claim TEXT,
    status INTEGER,
    body TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (service, key)
);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL,
    op TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    key TEXT,
    client_reference TEXT,
    received_at TEXT NOT NULL,
    finished_at TEXT,
    state TEXT NOT NULL,
    outcome TEXT,
    status INTEGER,
    fault TEXT,
    traceparent TEXT
);
"""

WIPED_TABLES = ("counters", "records", "idempotency", "requests")
# Columns added after the first release, by table, with their declarations.
ADDED_COLUMNS = {
    "records": {"committed_at": "TEXT", "settles_at": "TEXT", "failure_reason": "TEXT"},
    "requests": {"traceparent": "TEXT"},
}


def now(ago_s: float = 0.0) -> str:
    """RFC 3339 UTC with microseconds, so records made in the same millisecond still order (and the
    fixed width makes the strings compare as the times do)."""
    return (datetime.now(UTC) - timedelta(seconds=ago_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Database:
    def __init__(self, path: str | Path) -> None:
        # isolation_level=None: no implicit transactions; `transaction()` says where they are.
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        # Bumped by wipe(): work that started before a reset must not write into the fresh state.
        self.generation = 0
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL survives a killed process (the drills' case), only not a power cut.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(SCHEMA)
            self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        # A data dir made before a column existed (e.g. `.settled/` of `settled dev`) gains it here.
        for table, columns in ADDED_COLUMNS.items():
            present = {row["name"] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for column, declaration in columns.items():
                if column not in present:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def wipe(self) -> None:
        with self.transaction() as conn:
            for table in WIPED_TABLES:
                conn.execute(f"DELETE FROM {table}")
            # Restart AUTOINCREMENT too, so a reset sandbox numbers like a new one.
            conn.execute("DELETE FROM sqlite_sequence")
        self.generation += 1

    def close(self) -> None:
        with self._lock:
            self._conn.close()
