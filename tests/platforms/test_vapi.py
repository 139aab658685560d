"""Vapi's Server URL (`POST /v1/platforms/vapi`) on a running stack, with Vapi's own message types: each
case is judged by the sandbox business service's records, not by what the answer says."""

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.client.support import closed_run_billed
from tests.helpers import BOOKING, REFUND, Sandbox, new_id, wait_for, wait_state
from tests.platforms.conftest import ACME_KEY, GLOBEX_KEY, KIND, RETURN_SLACK_S, VAPI_HMAC_SECRET, WAIT_S
from tests.platforms.history import channel_events
from tests.platforms.payloads import (
    NOT_FINAL,
    Derived,
    example,
    vapi_end_of_call,
    vapi_results,
    vapi_signed,
    vapi_status,
    vapi_tool_calls,
)

PATH = "/v1/platforms/vapi"


def send(webhook: httpx.Client, body: bytes, key: str | None = ACME_KEY, **headers: str) -> httpx.Response:
    signed = vapi_signed(VAPI_HMAC_SECRET, body)
    auth = {"authorization": f"Bearer {key}"} if key else {}
    return webhook.post(PATH, content=body, headers={**signed, **auth, **headers})


def results(response: httpx.Response) -> list[tuple[str, str, str]]:
    assert response.status_code == 200, response.text
    return vapi_results(response.json())


VAPI = Derived("vapi")
op_id, op_key = VAPI.op_id, VAPI.op_key


def test_a_tool_call_is_answered_truthfully_and_a_redelivery_is_not_sent_again(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    [(tool_call_id, name, result)] = results(send(webhook, body))
    assert (tool_call_id, name) == ("tc-1", KIND)
    assert result.startswith("CONFIRMED by the business system.")
    key = op_key("acme", call_id, KIND, REFUND)
    assert op_id(call_id, KIND, REFUND) in result
    # Vapi's backoff plan sends the very same request again.
    assert results(send(webhook, body)) == [("tc-1", KIND, result)]
    assert len(platform_sandbox.writes(key)) == 1


def test_a_confirmed_tool_calls_run_closes_at_once_with_no_timer(
    platform_stack: Stack, webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    """Vapi never says what the caller heard, so the action does not linger for a `presented`: its
    run closes in the task it is confirmed in (no timer), counted from its history."""
    call_id, kind, params = new_id("call"), "reservation", {**BOOKING, "room": new_id("room")}
    [(_, _, result)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-1", kind, params))))
    assert result.startswith("CONFIRMED by the business system."), result
    workflow_id = action_workflow_id("acme", op_id(call_id, kind, params))
    closed = asyncio.run(closed_run_billed(platform_stack.temporal_address, workflow_id))
    assert (closed.counts["workflow started"], closed.counts["timer"]) == (1, 0), closed.counts
    assert len(platform_sandbox.writes(op_key("acme", call_id, kind, params))) == 1


def test_a_model_that_asks_again_with_the_same_params_meets_the_same_action(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    [(_, _, first)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))))
    # A new tool call id, the same details: the model got no answer in time and asks again.
    [(tool_call_id, _, again)] = results(
        send(webhook, vapi_tool_calls(call_id, ("tc-2", KIND, dict(REFUND))))
    )
    assert tool_call_id == "tc-2"
    key = op_key("acme", call_id, KIND, REFUND)
    assert op_id(call_id, KIND, REFUND) in first and op_id(call_id, KIND, REFUND) in again
    assert len(platform_sandbox.writes(key)) == 1


def test_concurrent_deliveries_attach_to_one_action(webhook: httpx.Client, platform_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: results(send(webhook, body)), range(4)))
    key = op_key("acme", call_id, KIND, REFUND)
    assert all(op_id(call_id, KIND, REFUND) in answer[0][2] for answer in answers), answers
    assert len(platform_sandbox.writes(key)) == 1


def test_the_calls_of_one_message_run_concurrently_and_answer_in_order(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    slow = {**REFUND, "order_id": new_id("slow")}
    slow_key = op_key("acme", call_id, KIND, slow)
    fault = platform_sandbox.fault("refunds", "create", "hold", slow_key, apply=True)
    invalid = {"order_id": "o-1", "amount": -5, "currency": "EUR"}
    body = vapi_tool_calls(
        call_id,
        ("tc-slow", KIND, slow),
        ("tc-fast", KIND, REFUND),
        ("tc-booking", "room_booking", BOOKING),
        ("tc-unknown", "send_flowers", {"to": "Ada"}),
        ("tc-invalid", KIND, invalid),
    )
    started = time.monotonic()
    answered = results(send(webhook, body))
    elapsed = time.monotonic() - started
    assert elapsed < WAIT_S + RETURN_SLACK_S, elapsed
    assert [tool_call_id for tool_call_id, _, _ in answered] == [
        "tc-slow", "tc-fast", "tc-booking", "tc-unknown", "tc-invalid",
    ]  # fmt: skip
    texts = {tool_call_id: text for tool_call_id, _, text in answered}
    assert texts["tc-slow"].startswith(NOT_FINAL) and "CONFIRMED" not in texts["tc-slow"], texts["tc-slow"]
    assert texts["tc-fast"].startswith("CONFIRMED")
    assert "go-ahead" in texts["tc-booking"] and "authorize_action" in texts["tc-booking"]
    assert "no tool 'send_flowers'" in texts["tc-unknown"] and "Nothing was sent" in texts["tc-unknown"]
    assert texts["tc-invalid"].startswith("Not recorded") and "amount" in texts["tc-invalid"]
    # What reached the service: the fast refund once, the slow one held once, nothing else.
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND))) == 1
    assert platform_sandbox.writes(op_key("acme", call_id, KIND, invalid)) == []
    assert platform_sandbox.writes(op_key("acme", call_id, "room_booking", BOOKING)) == []
    platform_sandbox.release(fault)


def test_a_slow_service_is_answered_within_the_wait_without_a_claim(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    key = op_key("acme", call_id, KIND, REFUND)
    fault = platform_sandbox.fault("refunds", "create", "hold", key, apply=True)
    started = time.monotonic()
    [(_, _, result)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))))
    assert time.monotonic() - started < WAIT_S + RETURN_SLACK_S
    assert result.startswith(NOT_FINAL) and "CONFIRMED" not in result, result
    platform_sandbox.wait_held(key)
    platform_sandbox.release(fault)
    operation_id = op_id(call_id, KIND, REFUND)
    wait_state(acme, operation_id, "confirmed", timeout_s=30)
    # Asked again once it is done: the truth, and still one refund.
    [(_, _, later)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-2", KIND, REFUND))))
    assert later.startswith("CONFIRMED")
    assert len(platform_sandbox.writes(key)) == 1


def test_a_go_ahead_and_a_check_through_the_tools(webhook: httpx.Client, platform_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    key = op_key("acme", call_id, "room_booking", BOOKING)
    operation_id = op_id(call_id, "room_booking", BOOKING)
    [(_, _, asked)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-1", "room_booking", BOOKING))))
    assert "nothing has been sent yet" in asked and platform_sandbox.writes(key) == []
    go = vapi_tool_calls(call_id, ("tc-2", "authorize_action", {"operation_id": operation_id}))
    [(_, _, authorized)] = results(send(webhook, go))
    assert authorized.startswith("CONFIRMED"), authorized
    [(_, _, checked)] = results(send(webhook, vapi_tool_calls(call_id, ("tc-3", "verify_action", {}))))
    assert f"room_booking (operation {operation_id}" in checked and "CONFIRMED" in checked
    assert len(platform_sandbox.writes(key)) == 1


def unauthenticated(case: str, body: bytes) -> dict[str, str]:
    """The headers of a request that must be refused: one thing wrong each, the rest right."""
    signed = vapi_signed(VAPI_HMAC_SECRET, body)
    bearer = {"authorization": f"Bearer {ACME_KEY}"}
    wrong = {
        "no signature": {"x-timestamp": signed["x-timestamp"]},
        "a stale signature": vapi_signed(VAPI_HMAC_SECRET, body, at=time.time() - 301),
        "a wrong signature": {**signed, "x-signature": "0" * 64},
        "another secret": vapi_signed("not-the-secret", body),
        # The same JSON, other bytes: the signature is over the raw body.
        "a signature over other bytes": vapi_signed(
            VAPI_HMAC_SECRET, json.dumps(json.loads(body), indent=1).encode()
        ),
    }
    if case in wrong:
        return {**wrong[case], **bearer}
    return {
        **signed,
        **({"authorization": "Bearer not-a-key-of-anyone"} if case == "a wrong API key" else {}),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no signature",
        "a stale signature",
        "a wrong signature",
        "another secret",
        "a signature over other bytes",
        "no API key",
        "a wrong API key",
    ],
)
def test_an_unauthenticated_request_is_refused_and_creates_nothing(
    case: str, webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    response = webhook.post(PATH, content=body, headers=unauthenticated(case, body))
    assert response.status_code == 401, (case, response.text)
    assert response.json()["error"]["code"] == "unauthorized"
    assert acme.get(f"/v1/actions/{op_id(call_id, KIND, REFUND)}").status_code == 404
    assert acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["work"] == "idle"
    assert platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND)) == []


def test_the_legacy_secret_header_names_the_tenant(webhook: httpx.Client, platform_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    response = send(
        webhook, vapi_tool_calls(call_id, ("tc-1", KIND, REFUND)), key=None, **{"x-vapi-secret": GLOBEX_KEY}
    )
    [(_, _, result)] = results(response)
    assert result.startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("globex", call_id, KIND, REFUND))) == 1


def test_the_end_of_a_call_closes_the_channel_once(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    conversation_id = f"vapi:{call_id}"
    assert send(webhook, vapi_status(call_id, "in-progress")).json() == {}
    assert send(webhook, vapi_status(call_id, "in-progress")).json() == {}
    ends = [
        vapi_status(call_id, "ended", "customer-ended-call"),
        vapi_end_of_call(call_id, "customer-ended-call"),
        vapi_end_of_call(call_id, "customer-ended-call"),
    ]
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda body: send(webhook, body), [*ends, *ends]))
    assert all(answer.status_code == 200 and answer.json() == {} for answer in answers)
    handoff = acme.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert handoff["channels"]["voice"] == "closed"
    assert handoff["channel_reasons"]["voice"] == "customer-ended-call"
    assert channel_events(platform_stack, "acme", conversation_id) == [
        ("channel_opened", "voice", None),
        ("channel_closed", "voice", "customer-ended-call"),
    ]
    # A start delivered after the end does not reopen it.
    send(webhook, vapi_status(call_id, "in-progress"))
    assert acme.get(f"/v1/conversations/{conversation_id}/handoff").json()["channels"]["voice"] == "closed"


def test_other_messages_answer_an_empty_object_and_change_nothing(
    webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    for status in ("queued", "ringing", "forwarding"):
        assert send(webhook, vapi_status(call_id, status)).json() == {}
    transcript = {
        "message": {"type": "transcript", "role": "user", "transcript": "hi", "call": {"id": call_id}}
    }
    assert send(webhook, json.dumps(transcript).encode()).json() == {}
    assert acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["channels"]["voice"] == "unused"


def test_tenants_are_kept_apart(
    webhook: httpx.Client, acme: httpx.Client, globex: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")  # the same call id, the same details, two tenants
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    [(_, _, for_acme)] = results(send(webhook, body, key=ACME_KEY))
    [(_, _, for_globex)] = results(send(webhook, body, key=GLOBEX_KEY))
    assert for_acme.startswith("CONFIRMED") and for_globex.startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND))) == 1
    assert len(platform_sandbox.writes(op_key("globex", call_id, KIND, REFUND))) == 1
    for client in (acme, globex):
        actions = client.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["actions"]
        assert len(actions) == 1


@pytest.mark.parametrize("name", ["vapi-tool-calls-custom-tools.json", "vapi-tool-calls-server-events.json"])
def test_the_documented_tool_call_shapes_are_answered(
    name: str, webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    """Vapi's documentation shows tool calls flat (`name`, and `arguments` or `parameters`, an object)
    rather than as the SDK types them: both are read."""
    recorded = example(name)
    call_id = new_id("call")
    recorded["message"]["call"]["id"] = call_id
    [(tool_call_id, tool, result)] = results(send(webhook, json.dumps(recorded).encode()))
    assert tool_call_id == recorded["message"]["toolCallList"][0]["id"] and tool == KIND
    assert result.startswith("CONFIRMED"), result
    params = (
        recorded["message"]["toolCallList"][0].get("arguments")
        or recorded["message"]["toolCallList"][0]["parameters"]
    )
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, params))) == 1


def test_the_documented_end_of_call_messages_close_the_channel(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    for name in ("vapi-status-update-ended.json", "vapi-end-of-call-report.json"):
        recorded = example(name)
        recorded["message"]["call"]["id"] = call_id
        response = send(webhook, json.dumps(recorded).encode())
        assert response.status_code == 200 and response.json() == {}
    wait_for(
        lambda: acme.get(f"/v1/conversations/vapi:{call_id}/handoff").json()["channels"]["voice"] == "closed"
    )
    assert [event[0] for event in channel_events(platform_stack, "acme", f"vapi:{call_id}")] == [
        "channel_closed"
    ]
