"""The adapters' client, pointed at this same API in-process: an edge (MCP, a voice platform's
webhook) asks settled exactly as an outside adapter would, so every /v1 rule (auth, tenants,
validation, derived operation ids, truthful answers) holds for it without a copy."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from settled.adapters.common import ActionKind

from settled.client import SettledClient
from settled.domain.kinds import Kinds

# Never resolved: the transport hands each request straight to the app.
IN_PROCESS_URL = "http://settled.in-process"


@asynccontextmanager
async def edge_client(app: FastAPI, api_key: str | None) -> AsyncIterator[SettledClient]:
    """A client of this app, calling it in-process with `api_key` as its Bearer credential, for the
    length of one edge request. No retries: nothing in between can drop a request. An edge never
    learns what the person heard (a platform's messages do not say it; an MCP client's model sees
    the answer, not the person), so the actions it creates do not linger for it."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_URL) as http:
        yield SettledClient(IN_PROCESS_URL, api_key, http=http, retries=0, reports_heard=False)


def offered_kinds(app: FastAPI) -> list[ActionKind]:
    """The kinds the API serves (what `GET /v1/kinds` lists), as the adapters' tools, by name."""
    kinds: Kinds = app.state.gateways.kinds
    return [ActionKind.from_spec(spec) for spec in sorted(kinds, key=lambda spec: spec.name)]


def tenant_key(app: FastAPI, tenant: str) -> str | None:
    """The settled API key of `tenant`, read from the settings when asked (None without API keys)."""
    keys: dict[str, str] = app.state.settings.api_keys
    return next((key for key, owner in keys.items() if owner == tenant), None)
