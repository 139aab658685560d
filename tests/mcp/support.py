"""Connecting the `mcp` package's own client to settled's /mcp: over streamable HTTP to a running API,
or in-process (the API app in the test's process, spoken to over ASGI), in either protocol revision."""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from settled.adapters.common import derived_operation_id

KEY_A = "tenant-a-key-0123456789"
KEY_B = "tenant-b-key-0123456789"
KEYS = f"tenant_a:{KEY_A},tenant_b:{KEY_B}"
WAIT_S = 3.0
# The one browser origin (besides a local inspector's) whose pages may call /mcp.
ALLOWED_ORIGIN = "https://assistant.example"
# The 2025 revision (initialize handshake, sessions, server-to-client requests) or the 2026 one
# (every request stands alone; what the server asks of the client comes back as `input_required`).
LEGACY, MODERN = "legacy", "auto"

Elicit = Callable[[ClientRequestContext, Any], Awaitable[types.ElicitResult]]
OnMessage = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class Endpoint:
    """Where /mcp is and how to reach it: `transport` is None over the network, an ASGI app in-process."""

    url: str
    mode: str
    transport: httpx2.ASGITransport | None = None

    @asynccontextmanager
    async def connect(
        self,
        key: str | None,
        conversation: str | None = None,
        *,
        elicit: Elicit | None = None,
        on_message: OnMessage | None = None,
        headers: dict[str, str] | None = None,
    ) -> AsyncIterator[Client]:
        sent = {**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})}
        url = f"{self.url}?conversation={conversation}" if conversation else self.url
        async with httpx2.AsyncClient(headers=sent, transport=self.transport, timeout=40) as http:
            client = Client(
                streamable_http_client(url, http_client=http),
                mode=self.mode,
                elicitation_callback=elicit,
                message_handler=on_message,
                cache=None,
            )
            async with client:
                yield client


def operation(conversation: str, kind: str, params: dict[str, Any]) -> str:
    """The operation id settled derives for this request (what the sandbox sees, with the tenant)."""
    return derived_operation_id(conversation, kind, params)


def answering(action: str, go_ahead: bool | None = None) -> tuple[Elicit, list[Any]]:
    """An elicitation callback that answers `action` (accept with `go_ahead`), and the questions it got."""
    asked: list[Any] = []

    async def elicit(ctx: ClientRequestContext, params: Any) -> types.ElicitResult:
        asked.append(params)
        content = {"go_ahead": go_ahead} if action == "accept" else None
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return elicit, asked


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
