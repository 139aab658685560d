"""ElevenLabs Agents' server tools and post-call webhook (`/v1/platforms/elevenlabs/tools` and
`/events`) on a running stack: the webhooks built from the elevenlabs SDK's own types and signed as its
own verifier accepts, each case judged by the sandbox service's records and the conversation's own
history."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.helpers import REFUND, Sandbox, new_id, wait_state
from tests.platforms.conftest import (
    ACME_ELEVENLABS_SECRET,
    ACME_KEY,
    GLOBEX_ELEVENLABS_SECRET,
    GLOBEX_KEY,
    KIND,
    RETURN_SLACK_S,
    WAIT_S,
)
from tests.platforms.history import channel_events
from tests.platforms.payloads import (
    NOT_FINAL,
    Derived,
    elevenlabs_post_call,
    elevenlabs_signed,
    elevenlabs_tool_call,
    example,
)

TOOLS = "/v1/platforms/elevenlabs/tools"
EVENTS = "/v1/platforms/elevenlabs/events"
ELEVENLABS = Derived("elevenlabs")
op_id, op_key = ELEVENLABS.op_id, ELEVENLABS.op_key


def tool(webhook: httpx.Client, body: bytes, key: str | None = ACME_KEY) -> httpx.Response:
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    return webhook.post(TOOLS, content=body, headers=headers)


def result(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"result"} and isinstance(answer["result"], str)
    return str(answer["result"])


def post_call(webhook: httpx.Client, body: bytes, secret: str = ACME_ELEVENLABS_SECRET) -> httpx.Response:
    return webhook.post(EVENTS, content=body, headers=elevenlabs_signed(secret, body))


def test_a_tool_call_is_confirmed_once_in_elevenlabs_own_conversation(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    conversation = new_id("conv")
    body = elevenlabs_tool_call(conversation, KIND, REFUND)
    first = result(tool(webhook, body))
    assert first.startswith("CONFIRMED by the business system.")
    # Delivered again, and the model asks again with the same details (in another order).
    assert result(tool(webhook, body)) == first
    again = elevenlabs_tool_call(conversation, KIND, dict(reversed(list(REFUND.items()))))
    assert result(tool(webhook, again)) == first
    assert len(platform_sandbox.writes(op_key("acme", conversation, KIND, REFUND))) == 1
    action = acme.get(f"/v1/actions/{op_id(conversation, KIND, REFUND)}").json()
    assert action["conversation_id"] == f"elevenlabs:{conversation}" and action["state"] == "confirmed"


def test_concurrent_deliveries_attach_to_one_action(webhook: httpx.Client, platform_sandbox: Sandbox) -> None:
    conversation = new_id("conv")
    body = elevenlabs_tool_call(conversation, KIND, REFUND)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: result(tool(webhook, body)), range(4)))
    assert all(op_id(conversation, KIND, REFUND) in answer for answer in answers), answers
    assert len(platform_sandbox.writes(op_key("acme", conversation, KIND, REFUND))) == 1


def test_a_slow_service_is_answered_within_the_wait_without_a_claim(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    conversation = new_id("conv")
    key = op_key("acme", conversation, KIND, REFUND)
    fault = platform_sandbox.fault("refunds", "create", "hold", key, apply=True)
    started = time.monotonic()
    answer = result(tool(webhook, elevenlabs_tool_call(conversation, KIND, REFUND)))
    assert time.monotonic() - started < WAIT_S + RETURN_SLACK_S
    assert answer.startswith(NOT_FINAL) and "CONFIRMED" not in answer, answer
    platform_sandbox.wait_held(key)
    platform_sandbox.release(fault)
    wait_state(acme, op_id(conversation, KIND, REFUND), "confirmed", timeout_s=30)
    # The model's next call with the same details hears the verified outcome; still one refund.
    assert result(tool(webhook, elevenlabs_tool_call(conversation, KIND, REFUND))).startswith("CONFIRMED")
    assert len(platform_sandbox.writes(key)) == 1


def test_what_is_wrong_with_a_call_is_said_and_nothing_is_sent(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    conversation = new_id("conv")
    invalid = {"order_id": "o-1", "amount": -5, "currency": "EUR"}
    answer = result(tool(webhook, elevenlabs_tool_call(conversation, KIND, invalid)))
    assert answer.startswith("Not recorded") and "amount" in answer and "Nothing was sent" in answer
    assert platform_sandbox.writes(op_key("acme", conversation, KIND, invalid)) == []
    unknown = result(tool(webhook, elevenlabs_tool_call(conversation, "send_flowers", {"to": "Ada"})))
    assert "no tool 'send_flowers'" in unknown
    nameless = result(tool(webhook, elevenlabs_tool_call(None, KIND, REFUND)))
    assert nameless.startswith("Not recorded") and "system__conversation_id" in nameless


def test_the_tool_credential_names_the_tenant(
    webhook: httpx.Client, acme: httpx.Client, globex: httpx.Client, platform_sandbox: Sandbox
) -> None:
    conversation = new_id("conv")
    body = elevenlabs_tool_call(conversation, KIND, REFUND)
    for refused in (tool(webhook, body, key=None), tool(webhook, body, key="not-a-key-at-all")):
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert "not-a-key-at-all" not in refused.text
    assert platform_sandbox.writes(op_key("acme", conversation, KIND, REFUND)) == []
    assert result(tool(webhook, body, key=GLOBEX_KEY)).startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("globex", conversation, KIND, REFUND))) == 1
    assert acme.get(f"/v1/actions/{op_id(conversation, KIND, REFUND)}").status_code == 404
    assert globex.get(f"/v1/actions/{op_id(conversation, KIND, REFUND)}").status_code == 200


def test_the_post_call_webhook_closes_the_channel_once_however_often_it_comes(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    conversation = new_id("conv")
    conversation_id = f"elevenlabs:{conversation}"
    ended = elevenlabs_post_call(conversation, "Client disconnected: 1000")
    audio = elevenlabs_post_call(conversation, "Client disconnected: 1000", kind="post_call_audio")
    # With retries on, ElevenLabs delivers a webhook again until it is answered 2xx.
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda body: post_call(webhook, body), [ended, ended, audio, ended]))
    assert [answer.status_code for answer in answers] == [200] * 4
    handoff = acme.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert handoff["channels"]["voice"] == "closed"
    assert handoff["channel_reasons"]["voice"] == "Client disconnected: 1000"
    assert channel_events(platform_stack, "acme", conversation_id) == [
        ("channel_closed", "voice", "Client disconnected: 1000")
    ]


def test_the_documented_payloads_are_answered(
    platform_stack: Stack, webhook: httpx.Client, globex: httpx.Client
) -> None:
    for name, reason in (
        ("elevenlabs-post-call-transcription.json", None),
        ("elevenlabs-call-initiation-failure.json", "busy"),
    ):
        recorded = example(name)
        conversation = recorded["data"]["conversation_id"] = new_id("conv")
        answer = post_call(webhook, json.dumps(recorded).encode(), GLOBEX_ELEVENLABS_SECRET)
        assert answer.status_code == 200, answer.text
        # globex's secret verified it: globex's conversation is closed.
        handoff = globex.get(f"/v1/conversations/elevenlabs:{conversation}/handoff").json()
        assert handoff["channels"]["voice"] == "closed"
        events = channel_events(platform_stack, "globex", f"elevenlabs:{conversation}")
        assert events == [("channel_closed", "voice", reason)]


def unverified(case: str, body: bytes) -> dict[str, str]:
    """The headers of a post-call webhook that must be refused."""
    if case == "unsigned":
        return {}
    if case == "stale":
        return elevenlabs_signed(ACME_ELEVENLABS_SECRET, body, at=time.time() - 31 * 60)
    if case == "another secret":
        return elevenlabs_signed("wsec_of_nobody_here_0000", body)
    if case == "another body":  # the same JSON, other bytes: the signature is over the raw body
        return elevenlabs_signed(ACME_ELEVENLABS_SECRET, json.dumps(json.loads(body), indent=1).encode())
    return {"elevenlabs-signature": "t=soon,v0=xyz"}


@pytest.mark.parametrize("case", ["unsigned", "stale", "another secret", "another body", "malformed"])
def test_an_unverified_webhook_is_refused_and_changes_nothing(
    case: str, webhook: httpx.Client, acme: httpx.Client
) -> None:
    conversation = new_id("conv")
    body = elevenlabs_post_call(conversation, "Client disconnected: 1000")
    response = webhook.post(EVENTS, content=body, headers=unverified(case, body))
    assert response.status_code == 401, (case, response.text)
    assert response.json()["error"]["code"] == "unauthorized"
    handoff = acme.get(f"/v1/conversations/elevenlabs:{conversation}/handoff").json()
    assert handoff["channels"]["voice"] == "unused"
