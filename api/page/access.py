"""Who may call the API: an API key, as on every route, or (for the text page) a conversation's signed
link token, valid only on the routes the page uses and only for that conversation and its actions.

`tenant_or_link` is a drop-in replacement for `api.deps.get_tenant`. The page's JS sends the token as
`Authorization: Bearer <token>`, and as `?t=<token>` on the stream (EventSource cannot set headers).
"""

import hmac
from typing import Annotated

from fastapi import Header, HTTPException, Request
from settled.api.page.links import LinkError, is_link_token, verify_token

# (method, route template) a link token opens: what the page reads and the controls it offers. Not
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


def key_tenant(keys: dict[str, str], presented: str) -> str | None:
    tenant = None
    for key, owner in keys.items():  # compare against every key, in constant time each
        if hmac.compare_digest(key.encode(), presented.encode()):
            tenant = owner
    return tenant


def link_token_of(request: Request, bearer: str) -> str | None:
    if is_link_token(bearer):
        return bearer
    query = request.query_params.get("t")
    return query if is_link_token(query) else None


async def link_tenant(request: Request, token: str) -> str:
    """The tenant of a link token that opens this route; 401 otherwise, 404 for another conversation's
    action (as for another tenant's id, it does not say whether the id exists)."""
    try:
        link = verify_token(token, request.app.state.settings.api_keys)
    except LinkError as error:
        raise HTTPException(401, str(error)) from None
    route = request.scope.get("route")
    if (request.method, getattr(route, "path", None)) not in PAGE_ROUTES:
        raise HTTPException(401, "a page link does not open this route: use an API key")
    params = request.path_params
    if "conversation_id" in params:
        if params["conversation_id"] != link.conversation_id:
            raise HTTPException(401, "the link is for another conversation")
    else:
        # An action route: the action must belong to the link's conversation. The gateway is
        # reached through app.state, not api.deps, which imports this module.
        gateway = await request.app.state.gateways.get()
        status = await gateway.get(link.tenant, params["operation_id"])
        if status.conversation_id != link.conversation_id:
            raise HTTPException(404, "no such operation or conversation")
    return link.tenant


async def tenant_or_link(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> str | None:
    """None without API keys; otherwise the tenant of the API key presented, or of a link token that
    opens this route (401 if neither)."""
    keys: dict[str, str] = request.app.state.settings.api_keys
    if not keys:
        return None
    scheme, _, presented = (authorization or "").partition(" ")
    bearer = presented if scheme.lower() == "bearer" else ""
    tenant = key_tenant(keys, bearer) if bearer else None
    if tenant is not None:
        return tenant
    token = link_token_of(request, bearer)
    if token is not None:
        return await link_tenant(request, token)
    if not bearer:
        raise HTTPException(401, "an Authorization: Bearer <key> header is required")
    raise HTTPException(401, "the API key is not valid")
