"""`POST /v1/platforms/retell/functions` (a custom function's URL) and `POST /v1/platforms/retell/events`
(the agent's webhook URL), for conversation `retell:{call.call_id}`.

A function call is answered 200 `{"result": text}`, the adapters' truthful text, within
`SETTLED_RETELL_WAIT_S`. `call_started` opens the voice channel and `call_ended` closes it, once each
however often Retell retries; every event answers 204, and the ones settled does not read
(`call_analyzed`, `transcript_updated`, the transfers) are read and dropped whatever their size. Both
routes verify `X-Retell-Signature` (`v={ms},d={hex HMAC-SHA256 of raw body + ms}`, at most 5 minutes
from now, as retell-sdk's own `verify` accepts) with the Retell API key: `SETTLED_RETELL_API_KEY`
without tenants; with tenants, the variable `SETTLED_RETELL_API_KEYS` names for each, and the key that
verifies the signature names the tenant.
"""

import re
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from settled.api.edges.platforms.answers import ToolCall, answer_calls, record_channel_event
from settled.api.edges.platforms.bodies import read_fields
from settled.api.edges.platforms.webhooks import (
    Signature,
    fresh,
    json_object,
    refused,
    signing_secrets,
    tenant_api_key,
)
from settled.api.errors import AnyTextJSONResponse

from settled.runtime.config import Settings

# Its answers may echo what the platform sent (a tool call id, an id a model named), whatever the text.
router = APIRouter(
    prefix="/v1/platforms/retell", tags=["platforms"], default_response_class=AnyTextJSONResponse
)

API_KEY = "SETTLED_RETELL_API_KEY"
_SIGNATURE = re.compile(r"v=(\d{1,16}),d=([0-9a-f]{64})")
# How far from now a signature may be made: what retell-sdk's `verify` accepts (5 minutes, either way).
MAX_AGE_S = 5 * 60.0
# The events settled reads: the call's start and end.
CHANNEL_EVENTS = {"call_started": "channel_opened", "call_ended": "channel_closed"}
# What it reads of them (the call's transcript, its words and their timing are only signed).
EVENT_FIELDS = frozenset({"call.call_id", "call.disconnection_reason"})


@router.post("/functions", summary="A Retell custom function's URL: one function call")
async def retell_function(request: Request) -> dict[str, str]:
    signature = _signature(request)
    body = await request.body()
    signature.update(body)
    api_key = tenant_api_key(request, signature.signer())
    name, call_id, arguments = _function_call(json_object(body), request)
    if call_id is None:
        return {"result": "Not recorded: the request names no call (call.call_id). Nothing was sent."}
    wait_s: float = request.app.state.settings.retell_wait_s
    calls = [ToolCall(name, arguments)]
    [answer] = await answer_calls(request.app, api_key, f"retell:{call_id}", calls, wait_s)
    return {"result": answer}


@router.post("/events", status_code=204, summary="A Retell agent's webhook URL: the call's start and end")
async def retell_event(request: Request) -> Response:
    signature = _signature(request)
    fields = await read_fields(request, signature, "event", CHANNEL_EVENTS, EVENT_FIELDS)
    tenant = signature.signer()
    api_key = tenant_api_key(request, tenant)
    picked = fields.checked()
    event, call_id = picked.get("event"), picked.get("call.call_id")
    reason = picked.get("call.disconnection_reason")
    if event in CHANNEL_EVENTS and isinstance(call_id, str) and call_id:
        type_ = CHANNEL_EVENTS[event]
        conversation_id = f"retell:{call_id}"
        refusal = await record_channel_event(request.app, tenant, api_key, conversation_id, type_, reason)
        if refusal is not None:
            return refusal
    return Response(status_code=204)


def _function_call(payload: dict[str, Any], request: Request) -> tuple[str, str | None, Any]:
    """(tool name, call id, arguments) of `{name, call, args}`. Without `args` (Retell's `args_at_root`)
    the arguments are the body's other keys; a body of the arguments only takes the name and the call
    id from the URL (`?name=refund&call_id={{call_id}}`), and then a `name` in the body is an argument."""
    query = request.query_params
    call = payload.get("call")
    call_id = call.get("call_id") if isinstance(call, dict) else query.get("call_id")
    if "args" in payload:
        name, arguments = payload.get("name"), payload["args"]
    else:
        name = query.get("name") or payload.get("name")
        wrapper = {"call"} if "name" in query else {"call", "name"}
        arguments = {key: value for key, value in payload.items() if key not in wrapper}
    return (
        name if isinstance(name, str) else "",
        call_id if isinstance(call_id, str) and call_id else None,
        arguments,
    )


def _signature(request: Request) -> Signature:
    """`X-Retell-Signature`, to be checked over the body with each Retell key that may have made it;
    401 at once if it is missing or not made within 5 minutes of now."""
    matched = _SIGNATURE.fullmatch(request.headers.get("x-retell-signature", "").strip())
    if matched is None:
        raise refused("X-Retell-Signature is required: v=<ms>,d=<hex HMAC-SHA256>")
    signed_at, digest = matched.groups()
    if not fresh(int(signed_at) / 1000, time.time(), MAX_AGE_S):
        raise refused("the signature was not made within 5 minutes of now")
    settings: Settings = request.app.state.settings
    keys = signing_secrets(request, "Retell", settings.retell_api_keys, API_KEY)
    return Signature(digest, b"", signed_at.encode(), keys)
