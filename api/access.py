"""Who may call the API: an API key (the whole tenant), or a token signed with one for a single
conversation (`settled.tokens`): a conversation token (a browser agent's credential) or a page link
(the text page's). A token is valid only on the routes its use opens, only for its conversation and
that conversation's actions.

Tokens come as `Authorization: Bearer <token>`, and as `?t=<token>` on the stream (EventSource
cannot set headers).
"""

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from settled.gateway.errors import NOT_FOUND

from settled.tokens import CONVERSATION_TOKEN, PAGE_LINK, TokenError, TokenUse, is_token_of, verify

# (method, route template) a page link opens: what the page reads and the controls it offers. Not
# create or amend: a link lets the customer follow and steer the work, not ask for new work.
PAGE_ROUTES: frozenset[tuple[str, str]] = frozenset(
    {
        ("POST", "/v1/conversations/{conversation_id}/events"),
        ("GET", "/v1/conversations/{conversation_id}/handoff"),
        ("GET", "/v1/conversations/{conversation_id}/stream"),
        ("GET", "/v1/actions/{operation_id}"),
        ("POST", "/v1/actions/{operation_id}/authorize"),
        ("POST", "/v1/actions/{operation_id}/cancel"),
        ("POST", "/v1/actions/{operation_id}/reconcile"),
        ("POST", "/v1/actions/{operation_id}/presented"),
    }
)
# A conversation token also asks for new work in its conversation (the route checks the body's
# conversation id) and lists the kinds its agent offers as tools. Amending stays with the API key.
CONVERSATION_TOKEN_ROUTES = PAGE_ROUTES | {("POST", "/v1/actions"), ("GET", "/v1/kinds")}


@dataclass(frozen=True)
class TokenScope:
    use: TokenUse
    routes: frozenset[tuple[str, str]]
    # A valid token on a route or conversation it does not open: the page has always been told 401;
    # a conversation token is a credential the API knows, so it is told 403 `forbidden`.
    refused: int


SCOPES = (
    TokenScope(CONVERSATION_TOKEN, CONVERSATION_TOKEN_ROUTES, 403),
    TokenScope(PAGE_LINK, PAGE_ROUTES, 401),
)


@dataclass(frozen=True)
class Caller:
    """Whom a request comes from: a tenant (None without API keys), and the one conversation a token
    opens (None with an API key, or without keys: every conversation of the tenant)."""

    tenant: str | None
    conversation_id: str | None = None

    def may_use(self, conversation_id: str) -> None:
        """403 unless the caller may act in `conversation_id` (asked where the id is in the body)."""
        if self.conversation_id is not None and conversation_id != self.conversation_id:
            raise HTTPException(403, "the token is for another conversation")


def key_tenant(keys: dict[str, str], presented: str) -> str | None:
    tenant = None
    for key, owner in keys.items():  # compare against every key, in constant time each
        if hmac.compare_digest(key.encode(), presented.encode()):
            tenant = owner
    return tenant


def _presented_token(request: Request, bearer: str) -> tuple[TokenScope, str] | None:
    query = request.query_params.get("t")
    for text in (bearer, query):
        for scope in SCOPES:
            if text is not None and is_token_of(scope.use, text):
                return scope, text
    return None


async def _token_caller(request: Request, scope: TokenScope, token: str) -> Caller:
    """The caller a token makes on this route; 401 if it is not valid, `scope.refused` on a route or
    conversation it does not open, 404 for another conversation's action (as for another tenant's id,
    it does not say whether the id exists)."""
    try:
        grant = verify(scope.use, token, request.app.state.settings.api_keys)
    except TokenError as error:
        raise HTTPException(401, str(error)) from None
    route = request.scope.get("route")
    if (request.method, getattr(route, "path", None)) not in scope.routes:
        raise HTTPException(scope.refused, f"a {scope.use.noun} does not open this route: use an API key")
    params = request.path_params
    if "conversation_id" in params:
        if params["conversation_id"] != grant.conversation_id:
            raise HTTPException(scope.refused, f"the {scope.use.noun} is for another conversation")
    elif "operation_id" in params:
        # An action route: the action must belong to the token's conversation. The gateway is
        # reached through app.state, not api.deps, which imports this module.
        gateway = await request.app.state.gateways.get()
        status = await gateway.get(grant.tenant, params["operation_id"])
        if status.conversation_id != grant.conversation_id:
            raise HTTPException(404, NOT_FOUND)
    return Caller(grant.tenant, grant.conversation_id)


async def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Caller:
    """No tenant without API keys; otherwise the tenant of the API key presented, or the tenant and
    conversation of a token that opens this route (401 if neither)."""
    keys: dict[str, str] = request.app.state.settings.api_keys
    if not keys:
        return Caller(None)
    scheme, _, presented = (authorization or "").partition(" ")
    bearer = presented if scheme.lower() == "bearer" else ""
    tenant = key_tenant(keys, bearer) if bearer else None
    if tenant is not None:
        return Caller(tenant)
    token = _presented_token(request, bearer)
    if token is not None:
        return await _token_caller(request, *token)
    if not bearer:
        raise HTTPException(401, "an Authorization: Bearer <key> header is required")
    raise HTTPException(401, "the API key is not valid")


def tenant(who: Annotated[Caller, Depends(caller)]) -> str | None:
    return who.tenant
