"""The Vapi HMAC secret, the Retell keys and the ElevenLabs webhook secrets verify the webhooks and go
nowhere else: not into an answer, an error, a part's log, or any workflow history the stack holds."""

import asyncio
import time

import httpx
from temporalio.client import Client

from settled.runtime.stack import Stack
from tests.helpers import REFUND, new_id
from tests.platforms.conftest import (
    ACME_ELEVENLABS_SECRET,
    ACME_KEY,
    ACME_RETELL_KEY,
    GLOBEX_ELEVENLABS_SECRET,
    GLOBEX_RETELL_KEY,
    SECRETS,
    VAPI_HMAC_SECRET,
)
from tests.platforms.payloads import (
    elevenlabs_post_call,
    elevenlabs_signed,
    elevenlabs_tool_call,
    retell_event,
    retell_function,
    retell_signed,
    vapi_end_of_call,
    vapi_signed,
    vapi_tool_calls,
)


async def _histories(stack: Stack) -> str:
    client = await Client.connect(stack.temporal_address)
    texts = []
    async for workflow in client.list_workflows():
        history = await client.get_workflow_handle(workflow.id, run_id=workflow.run_id).fetch_history()
        texts.append(history.to_json())
    return "\n".join(texts)


def test_the_webhook_secrets_are_in_no_answer_log_or_history(
    platform_stack: Stack, webhook: httpx.Client
) -> None:
    call_id = new_id("call")
    answers: list[httpx.Response] = []
    vapi = vapi_tool_calls(call_id, ("tc-1", "refund_nodedup", REFUND), ("tc-2", "refund", {"amount": -1}))
    bearer = {"authorization": f"Bearer {ACME_KEY}"}
    answers.append(
        webhook.post(
            "/v1/platforms/vapi", content=vapi, headers={**vapi_signed(VAPI_HMAC_SECRET, vapi), **bearer}
        )
    )
    answers.append(
        webhook.post("/v1/platforms/vapi", content=vapi, headers={**vapi_signed("wrong", vapi), **bearer})
    )
    stale = vapi_signed(VAPI_HMAC_SECRET, vapi, at=time.time() - 600)
    answers.append(webhook.post("/v1/platforms/vapi", content=vapi, headers={**stale, **bearer}))
    end = vapi_end_of_call(call_id, "customer-ended-call")
    answers.append(
        webhook.post(
            "/v1/platforms/vapi", content=end, headers={**vapi_signed(VAPI_HMAC_SECRET, end), **bearer}
        )
    )
    for key in (ACME_RETELL_KEY, GLOBEX_RETELL_KEY, "key_of_nobody_here_0000"):
        function = retell_function(call_id, "refund_nodedup", REFUND)
        answers.append(
            webhook.post(
                "/v1/platforms/retell/functions", content=function, headers=retell_signed(key, function)
            )
        )
        event = retell_event("call_ended", call_id, call_status="ended", disconnection_reason="user_hangup")
        answers.append(
            webhook.post("/v1/platforms/retell/events", content=event, headers=retell_signed(key, event))
        )
    tool = elevenlabs_tool_call(call_id, "refund_nodedup", REFUND)
    answers.append(webhook.post("/v1/platforms/elevenlabs/tools", content=tool, headers=bearer))
    for secret in (ACME_ELEVENLABS_SECRET, GLOBEX_ELEVENLABS_SECRET, "wsec_of_nobody_here_0000"):
        ended = elevenlabs_post_call(call_id, "Client disconnected: 1000")
        answers.append(
            webhook.post(
                "/v1/platforms/elevenlabs/events", content=ended, headers=elevenlabs_signed(secret, ended)
            )
        )
    stale = elevenlabs_signed(ACME_ELEVENLABS_SECRET, ended, at=time.time() - 600)
    answers.append(webhook.post("/v1/platforms/elevenlabs/events", content=ended, headers=stale))
    assert sorted({answer.status_code for answer in answers}) == [200, 204, 401]

    seen = {
        f"answer {i} ({answer.status_code})": answer.text + str(answer.headers)
        for i, answer in enumerate(answers)
    }
    for log in (platform_stack.data_dir / "logs").glob("*.log"):
        seen[f"log {log.name}"] = log.read_text(errors="replace")
    seen["every workflow history"] = asyncio.run(_histories(platform_stack))
    assert call_id in seen["every workflow history"]  # the histories searched hold these calls
    for where, text in seen.items():
        for name, value in SECRETS.items():
            assert value not in text, f"{name} is in {where}"
