"""`POST /v1/platforms/elevenlabs/tools` (the URL of an ElevenLabs Agents server tool) and `POST
/v1/platforms/elevenlabs/events` (the workspace's post-call webhook), for conversation
`elevenlabs:{conversation_id}`, ElevenLabs' own conversation id.

A server tool's body is `{"conversation_id", "tool", "params"}`, as `settled platform-tools elevenlabs`
configures it: the conversation id from the system dynamic variable `system__conversation_id`, the
tool's name a constant, the params from the model. It is answered 200 `{"result": text}`, the adapters'
truthful text, within `SETTLED_ELEVENLABS_WAIT_S`; with API keys, the tool's `Authorization: Bearer
KEY` header (a workspace secret at ElevenLabs) names the tenant.

The post-call webhook closes the voice channel once, however often it is delivered
(`post_call_transcription`, and `call_initiation_failure` for a call that never connected); other
types (`post_call_audio`, a call's whole audio, megabytes of it) answer 200, are read and dropped,
and change nothing. It is verified as ElevenLabs signs it: `ElevenLabs-Signature: t={unix
seconds},v0={hex HMAC-SHA256 of "{t}.{raw body}"}`, at most 30 minutes old (the tolerance of
ElevenLabs' own SDK), compared in constant time, keyed with `SETTLED_ELEVENLABS_WEBHOOK_SECRET`
without tenants and, with tenants, the variable `SETTLED_ELEVENLABS_WEBHOOK_SECRETS` names for each:
the secret that verifies names the tenant.
"""

import re
import time
from typing import Any

from fastapi import APIRouter, Request
from settled.api.edges.platforms.answers import ToolCall, answer_calls, record_channel_event
from settled.api.edges.platforms.bodies import read_fields
from settled.api.edges.platforms.webhooks import (
    Signature,
    bearer_caller,
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
    prefix="/v1/platforms/elevenlabs", tags=["platforms"], default_response_class=AnyTextJSONResponse
)

WEBHOOK_SECRET = "SETTLED_ELEVENLABS_WEBHOOK_SECRET"
CONVERSATION_VARIABLE = "system__conversation_id"
# The post-call webhook's types that end a call: what the call was, and why it ended.
CLOSING = {"post_call_transcription": "termination_reason", "call_initiation_failure": "failure_reason"}
# How old a signature may be: what the elevenlabs SDK's `construct_event` accepts (30 minutes).
MAX_AGE_S = 30 * 60.0
# What it reads of them (the transcript, the analysis and the audio are only signed).
EVENT_FIELDS = frozenset(
    {
        "data.conversation_id",
        "data.metadata.termination_reason",
        "data.termination_reason",
        "data.metadata.failure_reason",
        "data.failure_reason",
    }
)
_SIGNATURE_PART = re.compile(r"(t|v0)=([^,]*)")


@router.post("/tools", summary="An ElevenLabs Agents server tool's URL: one tool call")
async def elevenlabs_tool(request: Request) -> dict[str, str]:
    body = await request.body()
    _, api_key = bearer_caller(request)
    payload = json_object(body)
    tool, conversation = payload.get("tool"), payload.get("conversation_id")
    if not isinstance(conversation, str) or not conversation.strip():
        return {
            "result": f"Not recorded: the request names no conversation (conversation_id, from the dynamic "
            f"variable {CONVERSATION_VARIABLE}). Nothing was sent."
        }
    wait_s: float = request.app.state.settings.elevenlabs_wait_s
    calls = [ToolCall(tool if isinstance(tool, str) else "", payload.get("params", {}))]
    [answer] = await answer_calls(request.app, api_key, f"elevenlabs:{conversation}", calls, wait_s)
    return {"result": answer}


@router.post("/events", summary="The ElevenLabs post-call webhook: the end of a call")
async def elevenlabs_event(request: Request) -> Any:
    signature = _signature(request)
    fields = await read_fields(request, signature, "type", CLOSING, EVENT_FIELDS)
    tenant = signature.signer()
    api_key = tenant_api_key(request, tenant)
    picked = fields.checked()
    kind, conversation = picked.get("type"), picked.get("data.conversation_id")
    if kind in CLOSING and isinstance(conversation, str) and conversation:
        field = CLOSING[str(kind)]
        # Why the call ended: in `data.metadata` (a transcription), or at the top of `data` (a failure).
        reason = picked.get(f"data.metadata.{field}") or picked.get(f"data.{field}")
        conversation_id = f"elevenlabs:{conversation}"
        refusal = await record_channel_event(
            request.app, tenant, api_key, conversation_id, "channel_closed", reason
        )
        if refusal is not None:
            return refusal
    return {}


def _signature(request: Request) -> Signature:
    """`ElevenLabs-Signature`, to be checked over the body with each webhook secret that may have made
    it; 401 at once if it is missing, or more than 30 minutes old."""
    parts: dict[str, str] = {}
    for part in request.headers.get("elevenlabs-signature", "").split(","):
        matched = _SIGNATURE_PART.fullmatch(part.strip())
        if matched is not None:
            parts.setdefault(matched[1], matched[2])
    signed_at, digest = parts.get("t", ""), parts.get("v0", "")
    if not signed_at.isdigit() or not digest:
        raise refused("ElevenLabs-Signature is required: t=<unix seconds>,v0=<hex HMAC-SHA256>")
    if not fresh(int(signed_at), time.time(), MAX_AGE_S):
        raise refused("the signature was not made within the last 30 minutes")
    settings: Settings = request.app.state.settings
    secrets = signing_secrets(request, "ElevenLabs", settings.elevenlabs_webhook_secrets, WEBHOOK_SECRET)
    return Signature(digest, signed_at.encode() + b".", b"", secrets)
