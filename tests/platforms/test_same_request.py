"""Same request, same action, over the platforms' webhooks: a model that asks again in one call writing
its arguments otherwise (`5.0` or `5e0` for `5`, keys in another order) meets the one action, and the
refund service, which does not deduplicate, is written once; `5.1` is another refund."""

import httpx

from tests.helpers import Sandbox, new_id
from tests.platforms.conftest import ACME_KEY, ACME_RETELL_KEY, KIND, VAPI_HMAC_SECRET
from tests.platforms.payloads import (
    Derived,
    retell_call,
    retell_signed,
    vapi_results,
    vapi_signed,
    vapi_tool_calls,
)

FIRST = '{"order_id": "ORDER", "amount": 5, "currency": "EUR"}'
AGAIN = [
    '{"order_id": "ORDER", "amount": 5.0, "currency": "EUR"}',
    '{"currency": "EUR", "amount": 5e0, "order_id": "ORDER"}',
]
OTHER = '{"order_id": "ORDER", "amount": 5.1, "currency": "EUR"}'
PARAMS = {"order_id": "ORDER", "amount": 5, "currency": "EUR"}


def vapi(webhook: httpx.Client, call_id: str, arguments: str) -> str:
    body = vapi_tool_calls(call_id, (new_id("tc"), KIND, arguments))
    headers = {**vapi_signed(VAPI_HMAC_SECRET, body), "authorization": f"Bearer {ACME_KEY}"}
    response = webhook.post("/v1/platforms/vapi", content=body, headers=headers)
    assert response.status_code == 200, response.text
    [(_, _, result)] = vapi_results(response.json())
    return result


def retell(webhook: httpx.Client, call_id: str, arguments: str) -> str:
    # The body as Retell's own serializer may write it: the arguments' text kept as the model wrote it.
    call = httpx.Response(200, json=retell_call(call_id)).text
    body = f'{{"name": "{KIND}", "call": {call}, "args": {arguments}}}'.encode()
    response = webhook.post(
        "/v1/platforms/retell/functions", content=body, headers=retell_signed(ACME_RETELL_KEY, body)
    )
    assert response.status_code == 200, response.text
    return str(response.json()["result"])


def test_vapi_asked_again_with_5_0_and_5e0_refunds_once(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id, order = new_id("call"), new_id("order")
    op = Derived("vapi").op_id(call_id, KIND, {**PARAMS, "order_id": order})
    answers = [vapi(webhook, call_id, text.replace("ORDER", order)) for text in [FIRST, *AGAIN]]
    assert all(answer.startswith("CONFIRMED") and op in answer for answer in answers), answers
    assert len(platform_sandbox.writes(f"acme:{op}")) == 1
    other = vapi(webhook, call_id, OTHER.replace("ORDER", order))
    assert other.startswith("CONFIRMED") and op not in other
    another = Derived("vapi").op_id(call_id, KIND, {**PARAMS, "order_id": order, "amount": 5.1})
    assert another in other and len(platform_sandbox.writes(f"acme:{another}")) == 1


def test_retell_asked_again_with_5_0_and_5e0_refunds_once(
    webhook: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id, order = new_id("call"), new_id("order")
    op = Derived("retell").op_id(call_id, KIND, {**PARAMS, "order_id": order})
    answers = [retell(webhook, call_id, text.replace("ORDER", order)) for text in [FIRST, *AGAIN]]
    assert all(answer.startswith("CONFIRMED") and op in answer for answer in answers), answers
    assert len(platform_sandbox.writes(f"acme:{op}")) == 1
