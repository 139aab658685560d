"""`POST /v1/platforms/vapi`: Vapi's Server URL. Tool calls are answered with the adapters' truthful
text, all of one message within `SETTLED_VAPI_WAIT_S`, in the message's order; the call's start and
end open and close the voice channel of conversation `vapi:{call.id}`, once each.

Vapi ignores any answer but a 200, so every tool call is answered 200 with its text, refusals too (an
unknown tool, invalid params). Every other message type answers 200 `{}`; the ones settled does not
read (`conversation-update`, `speech-update`, `transcript`, …) are read and dropped whatever their
size; of the ones it reads (a long call's end, a tool call carrying the call's artifact), only the
fields it acts on are kept, the tool-call list up to 4 MiB.

Authentication: with API keys configured, Vapi's Bearer credential (or the legacy `X-Vapi-Secret`)
is the tenant's settled API key; with `SETTLED_VAPI_HMAC_SECRET` set, every request also carries
`x-timestamp` and `x-signature`, the hex HMAC-SHA256 of `"{x-timestamp}.{raw body}"`, made within
300 s of now (vapi-server-sdk has no verifier of its own to take a tolerance from).
"""

import contextlib
import json
import logging
import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from settled.api.edges.platforms.answers import ToolCall, answer_calls, record_channel_event
from settled.api.edges.platforms.bodies import read_fields
from settled.api.edges.platforms.webhooks import (
    Signature,
    bearer_caller,
    fresh,
    optional_secret,
    refused,
)
from settled.api.errors import AnyTextJSONResponse

from settled.business.secrets import SecretError

log = logging.getLogger("settled.api.edges.platforms")
# Its answers may echo what the platform sent (a tool call id, an id a model named), whatever the text.
router = APIRouter(prefix="/v1/platforms", tags=["platforms"], default_response_class=AnyTextJSONResponse)

HMAC_SECRET = "SETTLED_VAPI_HMAC_SECRET"
# A timestamp this large is in milliseconds (seconds will not reach it before the year 5138).
_MILLISECONDS_FROM = 10**11
# How far from now a signature may be made.
MAX_AGE_S = 300.0
# The message types settled reads: tool calls, and the call's start and end.
READS = frozenset({"tool-calls", "status-update", "end-of-call-report"})
# What it reads of them (a message carries the whole call, its artifact and transcript so far: the
# rest is only signed): the type, the call, how it stands and why it ended, and a tool-call message's
# list of calls, whole.
TYPE = "message.type"
PICKED = frozenset({"message", "message.call.id", "message.status", "message.endedReason"})
TOOL_CALLS = "message.toolCallList"


@router.post("/vapi", summary="Vapi's Server URL: tool calls and the call's start and end")
async def vapi_message(request: Request) -> Any:
    signature = _signature(request)
    tenant, api_key = bearer_caller(request, "x-vapi-secret")
    fields = await read_fields(request, signature, TYPE, READS, PICKED, {TOOL_CALLS})
    if signature is not None:
        signature.signer()
    picked = fields.checked()
    if not isinstance(picked.get("message"), dict):
        raise HTTPException(400, "the body has no message object")
    call_id = picked.get("message.call.id")
    conversation_id = f"vapi:{call_id}" if isinstance(call_id, str) and call_id else None
    kind, status = picked.get(TYPE), picked.get("message.status")
    if kind == "tool-calls":
        return await _tool_calls(request, api_key, conversation_id, picked.get(TOOL_CALLS))
    closing = kind == "end-of-call-report" or (kind == "status-update" and status == "ended")
    opening = kind == "status-update" and status == "in-progress"
    if conversation_id is not None and (closing or opening):
        type_ = "channel_closed" if closing else "channel_opened"
        reason = picked.get("message.endedReason")
        refusal = await record_channel_event(request.app, tenant, api_key, conversation_id, type_, reason)
        if refusal is not None:
            return refusal
    return {}


async def _tool_calls(
    request: Request, api_key: str | None, conversation_id: str | None, entries: object
) -> dict[str, Any]:
    entries = [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []
    calls = [_tool_call(entry) for entry in entries]
    if conversation_id is None:
        answers = ["Not recorded: the message names no call (call.id). Nothing was sent."] * len(calls)
    else:
        wait_s: float = request.app.state.settings.vapi_wait_s
        answers = await answer_calls(request.app, api_key, conversation_id, calls, wait_s)
    results = [
        {"toolCallId": str(entry.get("id", "")), "name": call.name, "result": answer}
        for entry, call, answer in zip(entries, calls, answers, strict=True)
    ]
    return {"results": results}


def _tool_call(entry: dict[str, Any]) -> ToolCall:
    """`{id, function: {name, arguments}}`, the arguments an object or the same as a JSON string;
    also the flat `{id, name, arguments | parameters}` that Vapi's documentation shows."""
    function = entry.get("function")
    source = function if isinstance(function, dict) else entry
    name = source.get("name")
    arguments = source.get("arguments", source.get("parameters", {}))
    if isinstance(arguments, str):
        # Text that is not JSON stays text: the channel answers that it is not a JSON object.
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return ToolCall(name if isinstance(name, str) else "", arguments)


def _signature(request: Request) -> Signature | None:
    """The HMAC credential's signature, to be checked over the body (None where no HMAC secret is
    set); 401 at once if it is missing or not made within 300 s of now."""
    try:
        secret = optional_secret(HMAC_SECRET)
    except SecretError:
        # Set but unreadable: the check is configured, so it is never skipped.
        raise refused(f"the request cannot be checked here ({HMAC_SECRET} cannot be read)") from None
    if secret is None:
        return None
    timestamp = request.headers.get("x-timestamp", "")
    signature = request.headers.get("x-signature", "")
    if not timestamp or not signature:
        raise refused("x-timestamp and x-signature are required (the HMAC of the request)")
    try:
        signed_at = float(timestamp)
    except ValueError:
        raise refused("x-timestamp is not a Unix time") from None
    if signed_at >= _MILLISECONDS_FROM:
        signed_at /= 1000
    if not fresh(signed_at, time.time(), MAX_AGE_S):
        raise refused("the signature was not made within the last 300 s")
    return Signature(signature.strip().lower(), timestamp.encode() + b".", b"", [(None, secret)])
