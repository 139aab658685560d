"""Retell's custom functions and agent webhook (`/v1/platforms/retell/functions` and `/events`) on a
running stack, signed by retell-sdk's own signer: each case judged by the sandbox service's records."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.helpers import REFUND, Sandbox, new_id, wait_state
from tests.platforms.conftest import ACME_RETELL_KEY, GLOBEX_RETELL_KEY, KIND, RETURN_SLACK_S, WAIT_S
from tests.platforms.history import channel_events
from tests.platforms.payloads import NOT_FINAL, Derived, example, retell_event, retell_function, retell_signed

FUNCTIONS = "/v1/platforms/retell/functions"
EVENTS = "/v1/platforms/retell/events"


def call(
    webhook: httpx.Client, body: bytes, key: str = ACME_RETELL_KEY, path: str = FUNCTIONS, **params: str
) -> httpx.Response:
    return webhook.post(path, content=body, headers=retell_signed(key, body), params=params or None)


def result(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"result"} and isinstance(answer["result"], str)
    return str(answer["result"])


RETELL = Derived("retell")
op_id, op_key = RETELL.op_id, RETELL.op_key


def test_a_function_call_is_answered_and_a_retry_is_not_sent_again(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    body = retell_function(call_id, KIND, REFUND)
    first = result(call(webhook, body))
    assert first.startswith("CONFIRMED by the business system.")
    # max_retry: Retell sends the same request again (re-signed, a moment later).
    assert result(call(webhook, body)) == first
    # The model asks again with the same details.
    assert result(call(webhook, retell_function(call_id, KIND, dict(REFUND)))) == first
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND))) == 1


def test_concurrent_retries_attach_to_one_action(webhook: httpx.Client, platform_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    body = retell_function(call_id, KIND, REFUND)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: result(call(webhook, body)), range(4)))
    key = op_key("acme", call_id, KIND, REFUND)
    assert all(op_id(call_id, KIND, REFUND) in answer for answer in answers), answers
    assert len(platform_sandbox.writes(key)) == 1


def test_a_slow_service_is_answered_within_the_wait_without_a_claim(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    key = op_key("acme", call_id, KIND, REFUND)
    fault = platform_sandbox.fault("refunds", "create", "hold", key, apply=True)
    started = time.monotonic()
    answer = result(call(webhook, retell_function(call_id, KIND, REFUND)))
    assert time.monotonic() - started < WAIT_S + RETURN_SLACK_S
    assert answer.startswith(NOT_FINAL) and "CONFIRMED" not in answer, answer
    platform_sandbox.wait_held(key)
    platform_sandbox.release(fault)
    wait_state(acme, op_id(call_id, KIND, REFUND), "confirmed", timeout_s=30)
    assert len(platform_sandbox.writes(key)) == 1


def test_invalid_params_and_unknown_functions_are_named(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    invalid = {"order_id": "o-1", "amount": -5, "currency": "EUR"}
    answer = result(call(webhook, retell_function(call_id, KIND, invalid)))
    assert answer.startswith("Not recorded") and "amount" in answer and "Nothing was sent" in answer
    assert platform_sandbox.writes(op_key("acme", call_id, KIND, invalid)) == []
    unknown = result(call(webhook, retell_function(call_id, "send_flowers", {"to": "Ada"})))
    assert "no tool 'send_flowers'" in unknown


def unverified(case: str, body: bytes) -> dict[str, str]:
    """The headers of a request that must be refused."""
    if case == "unsigned":
        return {}
    if case == "stale":
        return retell_signed(ACME_RETELL_KEY, body, at_ms=int((time.time() - 301) * 1000))
    if case == "another key":
        return retell_signed("key_of_nobody_here_0000", body)
    if case == "another body":  # the same JSON, other bytes: the signature is over the raw body
        return retell_signed(ACME_RETELL_KEY, json.dumps(json.loads(body), indent=1).encode())
    return {"x-retell-signature": "v=1,d=xyz"}


@pytest.mark.parametrize("case", ["unsigned", "stale", "another key", "another body", "malformed"])
def test_an_unverified_request_is_refused_and_creates_nothing(
    case: str, webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")
    for path, body in (
        (FUNCTIONS, retell_function(call_id, KIND, REFUND)),
        (EVENTS, retell_event("call_started", call_id)),
    ):
        response = webhook.post(path, content=body, headers=unverified(case, body))
        assert response.status_code == 401, (case, path, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
    assert acme.get(f"/v1/actions/{op_id(call_id, KIND, REFUND)}").status_code == 404
    assert acme.get(f"/v1/conversations/retell:{call_id}/handoff").json()["channels"]["voice"] == "unused"
    assert platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND)) == []


def test_the_key_that_verifies_names_the_tenant(
    webhook: httpx.Client, acme: httpx.Client, globex: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = new_id("call")  # one call id, the same details, each tenant's own Retell key
    body = retell_function(call_id, KIND, REFUND)
    assert result(call(webhook, body, key=ACME_RETELL_KEY)).startswith("CONFIRMED")
    assert result(call(webhook, body, key=GLOBEX_RETELL_KEY)).startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, REFUND))) == 1
    assert len(platform_sandbox.writes(op_key("globex", call_id, KIND, REFUND))) == 1
    for client in (acme, globex):
        assert len(client.get(f"/v1/conversations/retell:{call_id}/handoff").json()["actions"]) == 1


def test_call_started_and_call_ended_open_and_close_the_channel_once(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    conversation_id = f"retell:{call_id}"
    started = retell_event("call_started", call_id)
    ended = retell_event("call_ended", call_id, call_status="ended", disconnection_reason="user_hangup")
    analyzed = retell_event("call_analyzed", call_id, call_status="ended")
    # Retell retries a webhook that was not answered 2xx within 10 s: the same event, again and again.
    for body in (started, started):
        assert call(webhook, body, path=EVENTS).status_code == 204
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda body: call(webhook, body, path=EVENTS), [ended, ended, analyzed, ended])
        )
    assert [answer.status_code for answer in answers] == [204] * 4 and answers[0].content == b""
    handoff = acme.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert handoff["channels"]["voice"] == "closed" and handoff["channel_reasons"]["voice"] == "user_hangup"
    assert channel_events(platform_stack, "acme", conversation_id) == [
        ("channel_opened", "voice", None),
        ("channel_closed", "voice", "user_hangup"),
    ]
    # A start delivered late (after the end) does not reopen the call.
    assert call(webhook, started, path=EVENTS).status_code == 204
    assert len(channel_events(platform_stack, "acme", conversation_id)) == 2


def test_the_documented_function_call_and_args_at_root_are_answered(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    recorded = example("retell-function-call.json")
    call_id = new_id("call")
    recorded["call"]["call_id"] = call_id
    assert result(call(webhook, json.dumps(recorded).encode())).startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, recorded["args"]))) == 1
    # "Payload: args only": the body holds the arguments, the URL names the function and the call.
    args = example("retell-function-args-at-root.json")
    answer = result(call(webhook, json.dumps(args).encode(), name=KIND, call_id=call_id))
    assert answer.startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, args))) == 1
    # The arguments beside the name and the call, at the top level.
    merged = {"name": KIND, "call": recorded["call"], **{**args, "order_id": "o-3003"}}
    assert result(call(webhook, json.dumps(merged).encode())).startswith("CONFIRMED")
    assert len(platform_sandbox.writes(op_key("acme", call_id, KIND, {**args, "order_id": "o-3003"}))) == 1


def test_the_documented_webhook_events_are_answered(
    platform_stack: Stack, webhook: httpx.Client, acme: httpx.Client
) -> None:
    call_id = new_id("call")
    for name in ("retell-webhook-call-started.json", "retell-webhook-call-ended.json"):
        recorded = example(name)
        recorded["call"]["call_id"] = call_id
        assert call(webhook, json.dumps(recorded).encode(), path=EVENTS).status_code == 204
    assert channel_events(platform_stack, "acme", f"retell:{call_id}") == [
        ("channel_opened", "voice", None),
        ("channel_closed", "voice", "user_hangup"),
    ]
    assert acme.get(f"/v1/conversations/retell:{call_id}/handoff").json()["channels"]["voice"] == "closed"
