"""The sandbox app: the bookings, refunds and transfers services and their control plane, on one SQLite
file."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from settled.sandbox.drop import quiet_drops
from settled.sandbox.errors import install_error_handlers
from settled.sandbox.routes import control
from settled.sandbox.routes.business import business_router
from settled.sandbox.services import BOOKINGS, REFUNDS, TRANSFERS
from settled.sandbox.state import Sandbox


def create_app(db_path: str | Path) -> FastAPI:
    sandbox = Sandbox.open(db_path)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Here rather than at import: uvicorn has configured its loggers by the time it starts us.
        quiet_drops()
        yield
        await sandbox.close()

    app = FastAPI(title="settled sandbox", description=__doc__, lifespan=lifespan)
    app.state.sandbox = sandbox
    install_error_handlers(app)
    app.include_router(business_router(BOOKINGS))
    app.include_router(business_router(REFUNDS))
    app.include_router(business_router(TRANSFERS))
    app.include_router(control.router)
    return app
