"""Without API keys (one tenant): Vapi's webhook is open, as /v1 is, unless an HMAC secret is set; Retell's
routes verify the signature with `SETTLED_RETELL_API_KEY`. A stack of this module's own."""

import httpx

from tests.e2e.conftest import StackOptions, module_api, module_sandbox, module_stack
from tests.helpers import REFUND, TEST_KINDS, Sandbox, new_id
from tests.platforms.payloads import (
    retell_event,
    retell_function,
    retell_signed,
    vapi_results,
    vapi_tool_calls,
)
from tests.platforms.test_retell import op_id as retell_op
from tests.platforms.test_vapi import KIND
from tests.platforms.test_vapi import op_id as vapi_op

__all__ = ["module_api", "module_sandbox", "module_stack"]  # the module's stack, its API and its sandbox

RETELL_KEY = "key_one_tenant_retell_7e3b"
STACK = StackOptions(TEST_KINDS, env={"SETTLED_RETELL_API_KEY": RETELL_KEY})


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
