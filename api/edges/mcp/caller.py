"""Who calls /mcp: the tenant of the API key (checked at the door, exactly as on /v1), and the
conversation the calls belong to: the endpoint URL's `conversation`, a `Settled-Conversation` header,
or else the MCP session (`mcp:{Mcp-Session-Id}`)."""

from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from settled.api.edges.inprocess import tenant_key
from settled.api.strict import is_identifier
from starlette.requests import Request

CONVERSATION_PARAM = "conversation"
CONVERSATION_HEADER = "settled-conversation"
SESSION_HEADER = "mcp-session-id"


def tenant_user(tenant: str) -> AuthenticatedUser:
    """The tenant as the MCP transport's user: the SDK binds each session to the user that opened it,
    so a session id presented with another tenant's key answers 404, as if it did not exist. The user
    holds the tenant's name only, never its key."""
    return AuthenticatedUser(AccessToken(token="", client_id=tenant, scopes=[]))


@dataclass(frozen=True)
class Caller:
    tenant: str | None
    # None: nothing names it (a client of the 2026-07-28 revision has no session to fall back on).
    conversation_id: str | None

    @classmethod
    def of(cls, ctx: ServerRequestContext[Any, Any]) -> "Caller":
        request = ctx.request if isinstance(ctx.request, Request) else None
        if request is None:  # not over HTTP: no key was checked, so no tenant either
            return cls(None, None)
        user = request.scope.get("user")
        tenant = user.access_token.client_id if isinstance(user, AuthenticatedUser) else None
        named = request.query_params.get(CONVERSATION_PARAM) or request.headers.get(CONVERSATION_HEADER)
        session = request.headers.get(SESSION_HEADER)
        return cls(tenant, named or (f"mcp:{session}" if session else None))

    def api_key(self, app: FastAPI) -> str | None:
        """The tenant's settled API key, read when a call needs it (None without API keys)."""
        return tenant_key(app, self.tenant) if self.tenant is not None else None

    def conversation_problem(self) -> str | None:
        """Why no action can be asked for in this conversation, or None."""
        if self.conversation_id is None:
            return (
                "Not recorded: no conversation is named. Connect with the URL /mcp?conversation=ID or a "
                "Settled-Conversation header (a client of MCP 2026-07-28 has no session to name it). "
                "Nothing was sent."
            )
        if not is_identifier(self.conversation_id):
            return (
                f"Not recorded: the conversation {self.conversation_id[:140]!r} is not valid (1-128 of "
                "A-Z a-z 0-9 . _ : -). Nothing was sent."
            )
        return None
