"""What Vapi, Retell and ElevenLabs send, built with their own SDKs: Vapi's server messages from
vapi-server-sdk's types (validated back through them before they are sent), Retell's requests signed by
retell-sdk's own signer, ElevenLabs' post-call webhooks from the elevenlabs SDK's conversation types,
each signature accepted by the SDK's own verifier before it is sent. Nothing here imitates a platform
by hand."""

import datetime as dt
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elevenlabs import ElevenLabs
from elevenlabs.types import (
    ConversationHistoryMetadataCommonModel,
    ConversationHistoryTranscriptResponseModel,
    GetConversationResponseModel,
)
from retell.lib.webhook_auth import symmetric
from retell.types import WebCallResponse
from settled.adapters.common import derived_operation_id
from vapi.core.pydantic_utilities import parse_obj_as
from vapi.types import (
    Analysis,
    Artifact,
    Call,
    ServerMessage,
    ServerMessageEndOfCallReport,
    ServerMessageResponseToolCalls,
    ServerMessageStatusUpdate,
    ServerMessageToolCalls,
    ToolCall,
    ToolCallFunction,
)

EXAMPLES = Path(__file__).parent / "examples"
# How the adapters' text begins for an action that is not final: being sent, or sent and being checked.
NOT_FINAL = (
    "Request recorded and being sent; not confirmed yet.",
    "Request sent, but its result is not verified",
)
_CREATED = dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC)

# -- Vapi --------------------------------------------------------------------------------------------


def vapi_call(call_id: str) -> Call:
    return Call(
        id=call_id, org_id="org-settled-tests", created_at=_CREATED, updated_at=_CREATED, type="webCall"
    )


def _vapi_body(message: Any) -> bytes:
    body = ServerMessage(message=message).model_dump(mode="json", by_alias=True, exclude_none=True)
    # What is sent is what Vapi's own types read back as this message.
    assert type(parse_obj_as(ServerMessage, body).message) is type(message)
    return json.dumps(body).encode()


def vapi_tool_calls(call_id: str, *calls: tuple[str, str, dict[str, Any] | str]) -> bytes:
    """A `tool-calls` message: (tool call id, tool name, arguments) each, the arguments as the JSON
    string the SDK types them as (given as text, they are sent as written)."""
    tool_calls = [
        ToolCall(
            id=tool_call_id,
            type="function",
            function=ToolCallFunction(
                name=name, arguments=args if isinstance(args, str) else json.dumps(args)
            ),
        )
        for tool_call_id, name, args in calls
    ]
    message = ServerMessageToolCalls(
        type="tool-calls", call=vapi_call(call_id), tool_call_list=tool_calls, tool_with_tool_call_list=[]
    )
    return _vapi_body(message)


def vapi_status(call_id: str, status: str, ended_reason: str | None = None) -> bytes:
    message = ServerMessageStatusUpdate(
        type="status-update", status=status, ended_reason=ended_reason, call=vapi_call(call_id)
    )
    return _vapi_body(message)


def vapi_end_of_call(call_id: str, ended_reason: str) -> bytes:
    message = ServerMessageEndOfCallReport(
        type="end-of-call-report",
        ended_reason=ended_reason,
        call=vapi_call(call_id),
        artifact=Artifact(transcript="AI: How can I help? User: Refund my order."),
        analysis=Analysis(),
    )
    return _vapi_body(message)


def vapi_signed(secret: str, body: bytes, at: float | None = None) -> dict[str, str]:
    """The HMAC headers of a Vapi HMAC credential: hex HMAC-SHA256 of "{timestamp}.{body}"."""
    timestamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"x-timestamp": timestamp, "x-signature": digest, "content-type": "application/json"}


def vapi_results(response_json: Any) -> list[tuple[str, str, str]]:
    """(toolCallId, name, result) of each result, read with Vapi's own response type."""
    parsed = parse_obj_as(ServerMessageResponseToolCalls, response_json)
    assert parsed.error is None and parsed.results is not None
    return [(result.tool_call_id, result.name, result.result or "") for result in parsed.results]


# -- Retell ------------------------------------------------------------------------------------------


def retell_call(call_id: str, **fields: Any) -> dict[str, Any]:
    """A call object as Retell's own type has it."""
    call = WebCallResponse(
        call_id=call_id,
        agent_id="agent-settled-tests",
        agent_version=1,
        call_status=fields.pop("call_status", "ongoing"),
        call_type="web_call",
        access_token="retell-web-token",
        **fields,
    )
    return call.model_dump(mode="json", exclude_none=True)


def retell_function(call_id: str, name: str, args: dict[str, Any]) -> bytes:
    return json.dumps({"name": name, "call": retell_call(call_id), "args": args}).encode()


def retell_event(event: str, call_id: str, **fields: Any) -> bytes:
    return json.dumps({"event": event, "call": retell_call(call_id, **fields)}).encode()


def retell_signed(api_key: str, body: bytes, at_ms: int | None = None) -> dict[str, str]:
    """X-Retell-Signature, made by retell-sdk's own signer."""
    signature = symmetric["sign"](body.decode(), api_key, at_ms)
    return {"x-retell-signature": signature, "content-type": "application/json"}


# -- ElevenLabs --------------------------------------------------------------------------------------


def elevenlabs_tool_call(conversation_id: str | None, tool: str, params: Any) -> bytes:
    """What a server tool configured by `settled platform-tools elevenlabs` posts: the conversation id
    from the system dynamic variable, the tool's name as a constant, the model's params."""
    body = {"tool": tool, "params": params}
    return json.dumps(
        body if conversation_id is None else {"conversation_id": conversation_id, **body}
    ).encode()


def elevenlabs_post_call(
    conversation_id: str, termination_reason: str, kind: str = "post_call_transcription"
) -> bytes:
    """A post-call webhook: its `data` is the conversation as the SDK's own type has it."""
    conversation = GetConversationResponseModel(
        agent_id="agent_settled_tests",
        conversation_id=conversation_id,
        status="done",
        has_audio=True,
        has_user_audio=True,
        has_response_audio=True,
        has_auxiliary_audio=False,
        transcript=[
            ConversationHistoryTranscriptResponseModel(
                role="agent", message="How can I help?", time_in_call_secs=0
            ),
            ConversationHistoryTranscriptResponseModel(
                role="user", message="Refund my order.", time_in_call_secs=2
            ),
        ],
        metadata=ConversationHistoryMetadataCommonModel(
            start_time_unix_secs=int(_CREATED.timestamp()),
            call_duration_secs=21,
            termination_reason=termination_reason,
        ),
    )
    data = conversation.model_dump(mode="json", exclude_none=True)
    return json.dumps({"type": kind, "event_timestamp": int(time.time()), "data": data}).encode()


def elevenlabs_signed(secret: str, body: bytes, at: float | None = None) -> dict[str, str]:
    """`ElevenLabs-Signature: t=…,v0=…` as ElevenLabs signs a webhook; a fresh one is first accepted by
    the elevenlabs SDK's own verifier (`webhooks.construct_event`), so it is the platform's scheme."""
    timestamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    header = f"t={timestamp},v0={digest}"
    if at is None:
        sdk = ElevenLabs(api_key="webhook-verification-only")
        assert sdk.webhooks.construct_event(
            rawBody=body.decode(), sig_header=header, secret=secret
        ) == json.loads(body)
    return {"elevenlabs-signature": header, "content-type": "application/json"}


def example(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text())


@dataclass(frozen=True)
class Derived:
    """The operation ids settled derives for one platform's calls (conversation `PLATFORM:{call id}`),
    by the adapters' own rule, and the operation keys the business service records them under."""

    platform: str

    def op_id(self, call_id: str, kind: str, params: dict[str, Any]) -> str:
        return derived_operation_id(f"{self.platform}:{call_id}", kind, params)

    def op_key(self, tenant: str, call_id: str, kind: str, params: dict[str, Any]) -> str:
        return f"{tenant}:{self.op_id(call_id, kind, params)}"
