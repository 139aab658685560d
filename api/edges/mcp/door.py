"""The /mcp route: where a request comes from and its API key are checked here (403 for a browser page
of an origin not in `SETTLED_MCP_ALLOWED_ORIGINS`, as MCP's security guidance asks against DNS
rebinding; 401 without a valid key; both in the API's own error shape, before the MCP transport reads
anything), then the `mcp` package's streamable HTTP session manager serves the
request. The manager lives for one lifespan of the app: the SDK runs a manager once only."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from settled.api.access import key_tenant
from settled.api.edges.mcp.caller import tenant_user
from settled.api.edges.mcp.server import mcp_server
from settled.api.errors import send_error
from starlette.types import Receive, Scope, Send

PATH = "/mcp"


class McpDoor:
    """The ASGI app of `/mcp`: any method, as streamable HTTP uses POST, GET and DELETE."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        origin = headers.get(b"origin")
        if origin is not None and not self._allowed(origin.decode("latin-1")):
            message = "requests from this origin are not served (SETTLED_MCP_ALLOWED_ORIGINS)"
            await send_error(send, 403, "forbidden", message)
            return
        keys: dict[str, str] = self.app.state.settings.api_keys
        if keys:
            scheme, _, presented = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            bearer = presented if scheme.lower() == "bearer" else ""
            tenant = key_tenant(keys, bearer) if bearer else None
            if tenant is None:
                message = (
                    "the API key is not valid"
                    if bearer
                    else "an Authorization: Bearer <key> header is required"
                )
                await send_error(send, 401, "unauthorized", message, [(b"www-authenticate", b"Bearer")])
                return
            scope["user"] = tenant_user(tenant)
        sessions: StreamableHTTPSessionManager | None = getattr(self.app.state, "mcp_sessions", None)
        if sessions is None:
            raise RuntimeError(
                "/mcp is served only while the app's lifespan runs (settled.api.edges.mcp.door.serving)"
            )
        await sessions.handle_request(scope, receive, send)

    def _allowed(self, origin: str) -> bool:
        """Whether a browser page of `origin` may call (scheme and host compare without case, as
        browsers send them lowercase; `null`, an opaque origin, is never allowed)."""
        allowed: list[str] = self.app.state.settings.mcp_allowed_origins
        return origin.strip().lower() in {entry.lower() for entry in allowed}


def mount(app: FastAPI) -> None:
    app.state.mcp_server = mcp_server(app)
    app.add_route(PATH, McpDoor(app), include_in_schema=False)


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[None]:
    """Run the MCP session manager for as long as the app runs (call inside the app's lifespan)."""
    sessions = StreamableHTTPSessionManager(app=app.state.mcp_server)
    async with sessions.run():
        app.state.mcp_sessions = sessions
        try:
            yield
        finally:
            app.state.mcp_sessions = None
