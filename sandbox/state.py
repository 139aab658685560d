"""Everything one sandbox process holds, in one object the routes reach through the app."""

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from settled.sandbox.db import Database
from settled.sandbox.faults import FaultRegistry
from settled.sandbox.requestlog import RequestLog
from settled.sandbox.settling import TransferSettings
from settled.sandbox.store import Store
from starlette.applications import Starlette
from starlette.requests import Request

CLOSE_GRACE_S = 1.0


@dataclass
class Sandbox:
    db: Database
    store: Store
    log: RequestLog
    faults: FaultRegistry
    # Business requests between taking a fault and answering; close() lets them finish first.
    busy: int = 0
    # Writes in flight that lookups must not see (faults with `unseen`), by request-log seq.
    unseen: set[int] = field(default_factory=set)
    # How transfers committed from now on finish; in memory, like the faults.
    transfers: TransferSettings = field(default_factory=TransferSettings)

    @classmethod
    def open(cls, db_path: str | Path) -> "Sandbox":
        db = Database(db_path)
        store, log = Store(db), RequestLog(db)
        store.forget_unfinished()
        log.forget_unfinished()
        return cls(db=db, store=store, log=log, faults=FaultRegistry())

    def write_in_flight(self, service: str, key: str) -> bool:
        """Whether a lookup can tell that a create for this key is being processed right now."""
        return any(seq not in self.unseen for seq in self.log.writes_in_flight(service, key))

    def reset(self) -> None:
        self.faults.reset()
        self.unseen.clear()
        self.transfers = TransferSettings()
        self.db.wipe()

    async def close(self) -> None:
        self.faults.abort()
        deadline = time.monotonic() + CLOSE_GRACE_S
        while self.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.db.close()


def sandbox_of_app(app: Starlette) -> Sandbox:
    sandbox: Sandbox = app.state.sandbox
    return sandbox


def sandbox_of(request: Request) -> Sandbox:
    return sandbox_of_app(request.app)
