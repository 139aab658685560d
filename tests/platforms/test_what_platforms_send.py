"""Every message type each platform documents for the URL it is given, as it really sends it: answered
with a 2xx whatever its size (a platform disables a webhook that fails), what settled does not read
(a call's audio) read and dropped in bounded memory, nothing changed by a type settled does not act
on, and each signature judged within the tolerance the platform's own SDK uses.

The messages are built from the platforms' own SDK types (Vapi's server messages, Retell's webhook
events, ElevenLabs' conversation) and signed by their signers; the API process's peak memory is read
from the kernel (`/proc/PID/status` VmHWM, reset through `clear_refs`)."""

import base64
import json
import random
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from elevenlabs import ElevenLabs
from elevenlabs.errors import BadRequestError
from retell.lib.webhook_auth import verify as retell_verify
from retell.types.agent_response import AgentResponse
from vapi.types import ServerMessageMessage

from settled.runtime.stack import Stack
from tests.helpers import new_id
from tests.platforms.conftest import ACME_ELEVENLABS_SECRET, ACME_KEY, ACME_RETELL_KEY, KIND, VAPI_HMAC_SECRET
from tests.platforms.history import channel_events
from tests.platforms.payloads import (
    elevenlabs_post_call,
    elevenlabs_signed,
    elevenlabs_tool_call,
    retell_event,
    retell_signed,
    vapi_call,
    vapi_end_of_call,
    vapi_results,
    vapi_signed,
    vapi_tool_calls,
)

VAPI = "/v1/platforms/vapi"
RETELL_EVENTS = "/v1/platforms/retell/events"
ELEVENLABS_EVENTS = "/v1/platforms/elevenlabs/events"
ELEVENLABS_TOOLS = "/v1/platforms/elevenlabs/tools"
MIB = 1024 * 1024
# A four-minute call's audio, as ElevenLabs sends it (base64 in JSON): more than the 4 MiB body cap.
LARGE_BYTES = 6 * MIB
# The API process may grow this much while it reads and drops a body of LARGE_BYTES: a fraction of
# it (reading it whole would cost all of it, and parsing it more).
BOUNDED_GROWTH = LARGE_BYTES // 4
# ... and while it picks a few fields out of a body of LARGE_BYTES and acts on them: acting (the update
# sent to the conversation) costs a fixed MiB or two on top (measured 1.5-2, picking alone ~0); holding
# the body would cost all of it, and parsing it more.
PICKING_GROWTH = LARGE_BYTES // 2
# What settled acts on, per platform; every other type it answers and drops.
VAPI_READS = {"tool-calls", "status-update", "end-of-call-report"}
RETELL_READS = {"call_started", "call_ended"}


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


def peak_growth(stack: Stack, send: Callable[[], httpx.Response]) -> tuple[httpx.Response, int]:
    """What `send` answered, and how far the API process's resident memory rose above where it was
    (its peak, reset just before)."""
    pid = stack.children["api"].popen.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS now
    before = _kib(pid, "VmRSS")
    response = send()
    return response, _kib(pid, "VmHWM") - before


def audio(size: int) -> str:
    """`size` bytes of base64, as a call's recording is sent (incompressible, like audio)."""
    return base64.b64encode(random.randbytes(size * 3 // 4)).decode()


# -- the bodies, as each platform sends them ---------------------------------------------------------


def elevenlabs_audio(conversation_id: str, size: int) -> bytes:
    """A `post_call_audio` webhook: the conversation's whole audio, base64 MP3, in `data.full_audio`."""
    data = {"agent_id": "agent_settled_tests", "conversation_id": conversation_id, "full_audio": audio(size)}
    return json.dumps({"type": "post_call_audio", "event_timestamp": int(time.time()), "data": data}).encode()


def send_elevenlabs(webhook: httpx.Client, body: bytes) -> httpx.Response:
    return webhook.post(
        ELEVENLABS_EVENTS, content=body, headers=elevenlabs_signed(ACME_ELEVENLABS_SECRET, body)
    )


def literal(annotation: Any) -> str:
    """The one literal value an SDK type's `type` field holds (`Literal["hang"] | Any`)."""
    if typing.get_origin(annotation) is typing.Literal:
        return str(typing.get_args(annotation)[0])
    [value] = {literal(arg) for arg in typing.get_args(annotation) if "Literal" in repr(arg)}
    return value


def vapi_message(kind: type, call_id: str, **fields: Any) -> bytes:
    """A server message of Vapi's own type `kind`, on call `call_id` (the fields a test needs set)."""
    name = literal(kind.model_fields["type"].annotation)
    message = kind.model_construct(type=name, call=vapi_call(call_id), **fields)
    return json.dumps({"message": message.model_dump(mode="json", by_alias=True, exclude_none=True)}).encode()


def send_vapi(webhook: httpx.Client, body: bytes) -> httpx.Response:
    headers = {**vapi_signed(VAPI_HMAC_SECRET, body), "authorization": f"Bearer {ACME_KEY}"}
    return webhook.post(VAPI, content=body, headers=headers)


def send_retell(webhook: httpx.Client, body: bytes) -> httpx.Response:
    return webhook.post(RETELL_EVENTS, content=body, headers=retell_signed(ACME_RETELL_KEY, body))


def vapi_types() -> dict[str, type]:
    kinds = typing.get_args(ServerMessageMessage)
    return {literal(kind.model_fields["type"].annotation): kind for kind in kinds}


def retell_events() -> list[str]:
    """The webhook events a Retell agent may subscribe to (`webhook_events`), from retell-sdk."""
    [events] = [
        typing.get_args(typing.get_args(arg)[0])
        for arg in typing.get_args(AgentResponse.model_fields["webhook_events"].annotation)
        if typing.get_origin(arg) is list
    ]
    return list(events)


# -- a body settled does not read, whatever its size -------------------------------------------------


def large_elevenlabs(webhook: httpx.Client, call_id: str) -> httpx.Response:
    return send_elevenlabs(webhook, elevenlabs_audio(call_id, LARGE_BYTES))


def large_vapi(webhook: httpx.Client, call_id: str) -> httpx.Response:
    """A `conversation-update` of a long call (the whole conversation so far, in two formats)."""
    turns = [{"role": "user", "content": audio(1024)} for _ in range(LARGE_BYTES // 1000)]
    body = json.loads(vapi_message(vapi_types()["conversation-update"], call_id))
    body["message"]["messagesOpenAIFormatted"] = turns
    return send_vapi(webhook, json.dumps(body).encode())


def large_retell(webhook: httpx.Client, call_id: str) -> httpx.Response:
    """A `call_analyzed` of a long call: its transcript, word by word."""
    words = [{"content": audio(64), "start": n / 10, "end": n / 10 + 0.1} for n in range(LARGE_BYTES // 100)]
    utterance = {"role": "user", "content": "…", "words": words}
    body = retell_event("call_analyzed", call_id, call_status="ended", transcript_object=[utterance])
    return send_retell(webhook, body)


def small_elevenlabs(webhook: httpx.Client) -> httpx.Response:
    return send_elevenlabs(webhook, elevenlabs_audio(new_id("conv"), 1024))


def small_vapi(webhook: httpx.Client) -> httpx.Response:
    return send_vapi(webhook, vapi_message(vapi_types()["conversation-update"], new_id("call")))


def small_retell(webhook: httpx.Client) -> httpx.Response:
    return send_retell(webhook, retell_event("call_analyzed", new_id("call"), call_status="ended"))


Send = Callable[[httpx.Client, str], httpx.Response]
LARGE: dict[str, tuple[Send, str, int, Callable[[httpx.Client], httpx.Response]]] = {
    "elevenlabs post_call_audio": (large_elevenlabs, "elevenlabs", 200, small_elevenlabs),
    "vapi conversation-update": (large_vapi, "vapi", 200, small_vapi),
    "retell call_analyzed": (large_retell, "retell", 204, small_retell),
}


@pytest.mark.parametrize("case", LARGE)
def test_a_large_body_settled_does_not_read_is_answered_and_dropped_in_bounded_memory(
    case: str, platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    send, platform, status, warm_up = LARGE[case]
    assert warm_up(webhook).status_code == status  # the route's first use (imports, caches) is not measured
    call_id = new_id("call")
    response, growth = peak_growth(platform_stack, lambda: send(webhook, call_id))
    assert response.status_code == status, response.text[:300]
    assert int(response.request.headers["content-length"]) > LARGE_BYTES
    assert growth < BOUNDED_GROWTH, (
        f"the API grew {growth / MIB:.1f} MiB reading a {LARGE_BYTES / MIB:.0f} MiB body"
    )
    handoff = acme.get(f"/v1/conversations/{platform}:{call_id}/handoff").json()
    assert handoff["channels"]["voice"] == "unused" and handoff["actions"] == []


def test_the_measure_sees_a_body_that_is_kept(platform_stack: Stack, acme: httpx.Client) -> None:
    """The control: a body a route holds whole (a server tool's call, 3 MiB, under the cap) shows in
    the measure, so the bounds here are real ones."""
    raw = elevenlabs_tool_call(new_id("conv"), "no_such_tool", {"note": audio(3 * MIB)})
    response, growth = peak_growth(platform_stack, lambda: acme.post(ELEVENLABS_TOOLS, content=raw))
    assert response.status_code == 200, response.text[:300]
    assert growth >= 3 * MIB, f"the API grew only {growth / MIB:.1f} MiB holding a 3 MiB body"


# -- a large body settled acts on: only what it needs is kept ----------------------------------------


def turns(size: int) -> list[dict[str, Any]]:
    """A long call's conversation, about `size` bytes of it, as many turns (incompressible text)."""
    return [{"role": "user", "message": audio(1024), "time_in_call_secs": n} for n in range(size // 1000)]


def large_vapi_end(call_id: str, reason: str, size: int = LARGE_BYTES) -> bytes:
    """An `end-of-call-report` of a long call: its artifact (every message) before the call it names."""
    message = json.loads(vapi_end_of_call(call_id, reason))["message"]
    artifact = {**message.pop("artifact"), "messages": turns(size)}
    return json.dumps({"message": {"artifact": artifact, **message}}).encode()


def large_retell_end(call_id: str, reason: str, size: int = LARGE_BYTES) -> bytes:
    """A `call_ended` of a long call: its transcript word by word before the call id, the event last."""
    words = [{"content": audio(64), "start": n / 10, "end": n / 10 + 0.1} for n in range(size // 100)]
    transcript_object = [{"role": "user", "content": "…", "words": words}]
    call = json.loads(retell_event("call_ended", call_id, disconnection_reason=reason))["call"]
    return json.dumps(
        {"call": {"transcript_object": transcript_object, **call}, "event": "call_ended"}
    ).encode()


def large_elevenlabs_end(conversation_id: str, reason: str, size: int = LARGE_BYTES) -> bytes:
    """A `post_call_transcription` of a long call: its transcript before the conversation id."""
    body = json.loads(elevenlabs_post_call(conversation_id, reason))
    data = body["data"]
    data.pop("transcript")
    body["data"] = {"transcript": turns(size), **data}
    return json.dumps(body).encode()


END: dict[
    str, tuple[Callable[[str, str, int], bytes], Callable[[httpx.Client, bytes], httpx.Response], int, str]
] = {
    "vapi": (large_vapi_end, send_vapi, 200, "customer-ended-call"),
    "retell": (large_retell_end, send_retell, 204, "user_hangup"),
    "elevenlabs": (large_elevenlabs_end, send_elevenlabs, 200, "Client disconnected: 1000"),
}


@pytest.mark.parametrize("platform", END)
def test_a_large_call_end_closes_the_channel_once_in_bounded_memory(
    platform: str, platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    """A long call's end (6 MiB, over the 4 MiB cap) closes the voice channel, with its reason, reading
    only the fields settled acts on; delivered again, it changes nothing more."""
    build, send, status, reason = END[platform]
    # The route's first acting (imports, the Temporal client's caches) is not measured.
    assert send(webhook, build(new_id("call"), reason, MIB)).status_code == status
    call_id = new_id("call")
    body = build(call_id, reason)
    assert len(body) > LARGE_BYTES
    response, growth = peak_growth(platform_stack, lambda: send(webhook, body))
    assert response.status_code == status, response.text[:300]
    assert growth < PICKING_GROWTH, (
        f"the API grew {growth / MIB:.1f} MiB reading a {len(body) / MIB:.1f} MiB body"
    )
    assert send(webhook, body).status_code == status  # the platform's retry
    handoff = acme.get(f"/v1/conversations/{platform}:{call_id}/handoff").json()
    assert (handoff["channels"]["voice"], handoff["channel_reasons"]["voice"]) == ("closed", reason)
    assert channel_events(platform_stack, "acme", f"{platform}:{call_id}") == [
        ("channel_closed", "voice", reason)
    ]


def test_a_large_call_end_with_a_wrong_signature_is_refused_and_changes_nothing(
    webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    body = large_vapi_end(call_id, "customer-ended-call")
    headers = {**vapi_signed("not-the-vapi-secret", body), "authorization": f"Bearer {ACME_KEY}"}
    response = webhook.post(VAPI, content=body, headers=headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["channels"]["voice"] == "unused"


def test_a_large_vapi_tool_calls_message_is_answered_in_bounded_memory(
    platform_stack: Stack, webhook: httpx.Client
) -> None:
    """Vapi sends a tool call to the Server URL with the call's artifact so far: of a long call, more
    than the cap. Its calls are answered all the same, in order, from the list alone."""
    call_id = new_id("call")
    message = json.loads(vapi_tool_calls(call_id, ("tc-1", "no_such_tool", {}), ("tc-2", "other_tool", {})))
    message = message["message"]
    body = json.dumps({"message": {"artifact": {"messages": turns(LARGE_BYTES)}, **message}}).encode()
    response, growth = peak_growth(platform_stack, lambda: send_vapi(webhook, body))
    assert response.status_code == 200, response.text[:300]
    assert growth < PICKING_GROWTH, (
        f"the API grew {growth / MIB:.1f} MiB reading a {len(body) / MIB:.1f} MiB body"
    )
    results = vapi_results(response.json())
    assert [(tool_call_id, name) for tool_call_id, name, _ in results] == [
        ("tc-1", "no_such_tool"),
        ("tc-2", "other_tool"),
    ]
    assert all("no_such_tool" in text or "other_tool" in text for _, _, text in results), results


def test_a_large_body_with_a_wrong_signature_is_read_and_refused(
    webhook: httpx.Client, acme: httpx.Client
) -> None:
    conversation = new_id("conv")
    body = elevenlabs_audio(conversation, LARGE_BYTES)
    forged = elevenlabs_signed("wsec_of_nobody_here_0000", body)
    response = webhook.post(ELEVENLABS_EVENTS, content=body, headers=forged)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


# -- every documented type is answered and changes nothing it should not -----------------------------


def test_every_vapi_server_message_is_answered_and_only_the_call_s_start_and_end_change_anything(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    others = {name: kind for name, kind in vapi_types().items() if name not in VAPI_READS}
    assert len(others) >= 20  # assistant-request, conversation-update, hang, transcript, …
    for name, kind in others.items():
        response = send_vapi(webhook, vapi_message(kind, call_id))
        assert (response.status_code, response.json()) == (200, {}), (name, response.text)
    handoff = acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()
    assert handoff["channels"]["voice"] == "unused" and handoff["actions"] == []


def test_every_retell_webhook_event_is_answered_and_only_the_call_s_start_and_end_change_anything(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    events = retell_events()
    assert set(events) > RETELL_READS and "call_analyzed" in events
    for event in events:
        if event in RETELL_READS:
            continue
        response = send_retell(webhook, retell_event(event, call_id, call_status="ended"))
        assert response.status_code == 204, (event, response.text)
    handoff = acme.get(f"/v1/conversations/retell:{call_id}/handoff").json()
    assert handoff["channels"]["voice"] == "unused" and handoff["actions"] == []
    for event in ("call_started", "call_ended"):
        assert send_retell(webhook, retell_event(event, call_id)).status_code == 204
    assert [kind for kind, _, _ in channel_events(platform_stack, "acme", f"retell:{call_id}")] == [
        "channel_opened",
        "channel_closed",
    ]


def test_every_elevenlabs_post_call_type_is_answered_and_only_the_call_s_end_closes_the_channel(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    conversation = new_id("conv")
    assert send_elevenlabs(webhook, elevenlabs_audio(conversation, 64 * 1024)).status_code == 200
    assert (
        acme.get(f"/v1/conversations/elevenlabs:{conversation}/handoff").json()["channels"]["voice"]
        == "unused"
    )
    transcription = elevenlabs_post_call(conversation, "Client disconnected: 1000")
    assert send_elevenlabs(webhook, transcription).status_code == 200
    failure = elevenlabs_post_call(conversation, "busy", kind="call_initiation_failure")
    assert send_elevenlabs(webhook, failure).status_code == 200
    assert channel_events(platform_stack, "acme", f"elevenlabs:{conversation}") == [
        ("channel_closed", "voice", "Client disconnected: 1000")
    ]


# -- signatures, within each SDK's own tolerance -----------------------------------------------------


def elevenlabs_sdk_accepts(body: bytes, header: str, secret: str) -> bool:
    try:
        ElevenLabs(api_key="webhook-verification-only").webhooks.construct_event(
            rawBody=body.decode(), sig_header=header, secret=secret
        )
    except BadRequestError:
        return False
    return True


@pytest.mark.parametrize(("age_min", "accepted"), [(20, True), (31, False)])
def test_an_elevenlabs_signature_is_judged_as_the_elevenlabs_sdk_judges_it(
    age_min: int, accepted: bool, platform_stack: Stack, webhook: httpx.Client
) -> None:
    """ElevenLabs may deliver (or retry) a webhook long after it signed it: its SDK accepts 30 minutes."""
    conversation = new_id("conv")
    body = elevenlabs_post_call(conversation, "Client disconnected: 1000")
    headers = elevenlabs_signed(ACME_ELEVENLABS_SECRET, body, at=time.time() - age_min * 60)
    assert elevenlabs_sdk_accepts(body, headers["elevenlabs-signature"], ACME_ELEVENLABS_SECRET) is accepted
    response = webhook.post(ELEVENLABS_EVENTS, content=body, headers=headers)
    assert response.status_code == (200 if accepted else 401), response.text
    events = channel_events(platform_stack, "acme", f"elevenlabs:{conversation}") if accepted else []
    assert events == ([("channel_closed", "voice", "Client disconnected: 1000")] if accepted else [])


@pytest.mark.parametrize(("age_s", "accepted"), [(280, True), (320, False)])
def test_a_retell_signature_is_judged_as_retell_sdk_judges_it(
    age_s: int, accepted: bool, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    body = retell_event("call_started", call_id)
    headers = retell_signed(ACME_RETELL_KEY, body, at_ms=int((time.time() - age_s) * 1000))
    assert bool(retell_verify(body.decode(), ACME_RETELL_KEY, headers["x-retell-signature"])) is accepted
    response = webhook.post(RETELL_EVENTS, content=body, headers=headers)
    assert response.status_code == (204 if accepted else 401), response.text
    voice = acme.get(f"/v1/conversations/retell:{call_id}/handoff").json()["channels"]["voice"]
    assert voice == ("open" if accepted else "unused")


def test_a_vapi_tool_call_list_over_the_cap_is_refused(webhook: httpx.Client, acme: httpx.Client) -> None:
    """What settled keeps whole, a tool-call list, is capped at 4 MiB: one larger is refused, nothing
    recorded."""
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, {"note": audio(5 * MIB)}))
    response = send_vapi(webhook, body)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
    assert acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["actions"] == []
