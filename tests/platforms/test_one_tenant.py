"""Without API keys (one tenant): Vapi's webhook is open, as /v1 is, unless an HMAC secret is set; Retell's
routes verify the signature with `SETTLED_RETELL_API_KEY`. A stack of this module's own."""

import os
import signal
import time

import httpx

from settled.runtime.stack import Stack
from tests.e2e.conftest import StackOptions, module_api, module_sandbox, module_stack
from tests.helpers import REFUND, TEST_KINDS, Sandbox, new_id, wait_for
from tests.platforms.conftest import KIND
from tests.platforms.payloads import (
    Derived,
    retell_event,
    retell_function,
    retell_signed,
    vapi_results,
    vapi_tool_calls,
)

vapi_op, retell_op = Derived("vapi").op_id, Derived("retell").op_id
__all__ = ["module_api", "module_sandbox", "module_stack"]  # the module's stack, its API and its sandbox

RETELL_KEY = "key_one_tenant_retell_7e3b"
WAIT_S = 2.0
STACK = StackOptions(
    TEST_KINDS, env={"SETTLED_RETELL_API_KEY": RETELL_KEY, "SETTLED_VAPI_WAIT_S": str(WAIT_S)}
)


def test_vapi_is_open_without_api_keys(module_api: httpx.Client, module_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    response = module_api.post(
        "/v1/platforms/vapi", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    [(_, _, result)] = vapi_results(response.json())
    assert result.startswith("CONFIRMED")
    # No tenant: the operation key is the operation id itself.
    assert len(module_sandbox.writes(vapi_op(call_id, KIND, REFUND))) == 1


def test_retell_verifies_with_the_one_retell_key(module_api: httpx.Client, module_sandbox: Sandbox) -> None:
    call_id = new_id("call")
    body = retell_function(call_id, KIND, REFUND)
    unsigned = module_api.post("/v1/platforms/retell/functions", content=body)
    assert unsigned.status_code == 401, unsigned.text
    signed = module_api.post(
        "/v1/platforms/retell/functions", content=body, headers=retell_signed(RETELL_KEY, body)
    )
    assert signed.status_code == 200 and signed.json()["result"].startswith("CONFIRMED"), signed.text
    assert len(module_sandbox.writes(retell_op(call_id, KIND, REFUND))) == 1
    event = retell_event("call_ended", call_id, call_status="ended", disconnection_reason="agent_hangup")
    answer = module_api.post(
        "/v1/platforms/retell/events", content=event, headers=retell_signed(RETELL_KEY, event)
    )
    assert answer.status_code == 204
    handoff = module_api.get(f"/v1/conversations/retell:{call_id}/handoff").json()
    assert handoff["channels"]["voice"] == "closed" and handoff["channel_reasons"]["voice"] == "agent_hangup"


def test_a_call_temporal_cannot_take_in_time_is_answered_within_the_wait_and_still_recorded(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """Temporal itself stalls (SIGSTOP): the webhook still answers within the wait, without a claim and
    saying that asking again is safe; the request goes on, and the model's next ask meets it."""
    call_id = new_id("call")
    body = vapi_tool_calls(call_id, ("tc-1", KIND, REFUND))
    headers = {"content-type": "application/json"}
    temporal = module_stack.children["temporal"].popen
    os.killpg(temporal.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        response = module_api.post("/v1/platforms/vapi", content=body, headers=headers)
        elapsed = time.monotonic() - started
    finally:
        os.killpg(temporal.pid, signal.SIGCONT)
    [(_, _, result)] = vapi_results(response.json())
    assert elapsed < WAIT_S + 1.0, elapsed
    assert result.startswith("Could not confirm the request was recorded") and "CONFIRMED" not in result
    assert "Calling again with the same details is safe" in result
    again = vapi_tool_calls(call_id, ("tc-2", KIND, REFUND))

    def confirmed() -> str | None:
        [(_, _, text)] = vapi_results(
            module_api.post("/v1/platforms/vapi", content=again, headers=headers).json()
        )
        return text if text.startswith("CONFIRMED") else None

    later = wait_for(confirmed, timeout_s=60, what="the request to be confirmed")
    assert vapi_op(call_id, KIND, REFUND) in later
    assert len(module_sandbox.writes(vapi_op(call_id, KIND, REFUND))) == 1
