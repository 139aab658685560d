"""No input makes a platform's webhook fail. Text that is no Unicode text (a lone surrogate, which JSON's
escapes carry) in a tool call's arguments is refused in the platform's own 200 tool result, naming the
field, and nothing is recorded or sent; in a call id it is refused the same way; in what settled only
echoes (a tool call's id) or notes (why a call ended) it changes nothing else. Tool arguments of any
shape and text, generated, never make a server error; each refused one records nothing (judged by the
sandbox's records and the conversation's handoff)."""

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from settled.domain.canonical import not_text
from tests.any_input import ANY_OBJECT, refund_shaped
from tests.helpers import REFUND, Sandbox, new_id, wait_for
from tests.platforms.conftest import ACME_KEY, ACME_RETELL_KEY, KIND, VAPI_HMAC_SECRET
from tests.platforms.payloads import (
    Derived,
    elevenlabs_tool_call,
    retell_event,
    retell_function,
    retell_signed,
    vapi_end_of_call,
    vapi_results,
    vapi_signed,
    vapi_tool_calls,
)

LONE = "\ud800"  # written by json.dumps as JSON's escape, as a platform would send it
# Per platform: enough to meet every shape of argument, few enough to stay a few seconds.
EXAMPLES = 15
ARGUMENTS = ANY_OBJECT | refund_shaped(st.sampled_from(["EUR", f"EU{LONE}"]))


def vapi(webhook: httpx.Client, call_id: str, args: Any, tool_call_id: str = "tc-1") -> tuple[str, str]:
    body = vapi_tool_calls(call_id, (tool_call_id, KIND, args))
    headers = {**vapi_signed(VAPI_HMAC_SECRET, body), "authorization": f"Bearer {ACME_KEY}"}
    answer = webhook.post("/v1/platforms/vapi", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    [(echoed, _, result)] = vapi_results(answer.json())
    return echoed, result


def retell(webhook: httpx.Client, call_id: str, args: Any) -> str:
    body = retell_function(call_id, KIND, args)
    answer = webhook.post(
        "/v1/platforms/retell/functions", content=body, headers=retell_signed(ACME_RETELL_KEY, body)
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["result"])


def elevenlabs(webhook: httpx.Client, conversation_id: str, args: Any) -> str:
    body = elevenlabs_tool_call(conversation_id, KIND, args)
    headers = {"content-type": "application/json", "authorization": f"Bearer {ACME_KEY}"}
    answer = webhook.post("/v1/platforms/elevenlabs/tools", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["result"])


def _nothing_recorded(acme: httpx.Client, sandbox: Sandbox, platform: str, call_id: str, args: Any) -> None:
    conversation = f"{platform}:{call_id}"
    if isinstance(args, dict):
        assert sandbox.writes(Derived(platform).op_key("acme", call_id, KIND, args)) == []
    if not_text(conversation) is None:
        handoff = acme.get(f"/v1/conversations/{conversation}/handoff").json()
        assert handoff["actions"] == [], handoff


def _refused(result: str, field: str) -> None:
    assert result.startswith("Not recorded") and "Nothing was sent" in result, result
    assert field in result and "not valid Unicode text" in result, result


BAD_ARGS = [
    ({**REFUND, "order_id": f"o-{LONE}"}, "params.order_id"),
    ({**REFUND, LONE: 1}, "params.\\ud800"),
    ({**REFUND, "note": [{"x": LONE}]}, "params.note.0.x"),
]


def test_tool_arguments_that_are_not_text_are_refused_by_name_on_every_platform(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    for args, field in BAD_ARGS:
        call_id = new_id("call")
        _refused(vapi(webhook, call_id, args)[1], field)
        _nothing_recorded(acme, platform_sandbox, "vapi", call_id, args)
        _refused(retell(webhook, call_id, args), field)
        _nothing_recorded(acme, platform_sandbox, "retell", call_id, args)
        _refused(elevenlabs(webhook, call_id, args), field)
        _nothing_recorded(acme, platform_sandbox, "elevenlabs", call_id, args)


def test_a_call_id_that_is_not_text_is_refused_in_the_tool_result(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    call_id = f"call-{LONE}"
    for answer in (
        vapi(webhook, call_id, REFUND)[1],
        retell(webhook, call_id, REFUND),
        elevenlabs(webhook, call_id, REFUND),
    ):
        assert answer.startswith("Not recorded") and "conversation_id" in answer, answer
    for platform in ("vapi", "retell", "elevenlabs"):
        _nothing_recorded(acme, platform_sandbox, platform, call_id, REFUND)


def test_what_settled_only_echoes_or_notes_may_be_any_text(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox
) -> None:
    """A tool call id comes back as it came; a reason for the end that is no text is dropped, and the
    call still ends."""
    call_id = new_id("call")
    params = {**REFUND, "order_id": new_id("order")}
    echoed, result = vapi(webhook, call_id, params, tool_call_id=f"tc-{LONE}")
    assert echoed == f"tc-{LONE}" and result.startswith("CONFIRMED"), result
    assert len(platform_sandbox.writes(Derived("vapi").op_key("acme", call_id, KIND, params))) == 1

    ends: list[tuple[str, Callable[[], httpx.Response]]] = []
    vapi_end = vapi_end_of_call(call_id, "customer-ended-call").replace(b"customer-ended-call", b"x-\\ud800")
    headers = {**vapi_signed(VAPI_HMAC_SECRET, vapi_end), "authorization": f"Bearer {ACME_KEY}"}
    ends.append(
        (f"vapi:{call_id}", lambda: webhook.post("/v1/platforms/vapi", content=vapi_end, headers=headers))
    )
    retell_call = new_id("call")
    retell_end = retell_event(
        "call_ended", retell_call, call_status="ended", disconnection_reason="user_hangup"
    )
    retell_end = retell_end.replace(b'"user_hangup"', b'"x-\\ud800"')
    signed = retell_signed(ACME_RETELL_KEY, retell_end)
    ends.append(
        (
            f"retell:{retell_call}",
            lambda: webhook.post("/v1/platforms/retell/events", content=retell_end, headers=signed),
        )
    )
    for conversation, end in ends:
        assert end().status_code in (200, 204)

        def closed(conversation: str = conversation) -> bool:
            return (
                acme.get(f"/v1/conversations/{conversation}/handoff").json()["channels"]["voice"] == "closed"
            )

        wait_for(closed, 30, f"{conversation} closed")


ASK: dict[str, Callable[[httpx.Client, str, Any], str]] = {
    "vapi": lambda http, call_id, args: vapi(http, call_id, args)[1],
    "retell": retell,
    "elevenlabs": elevenlabs,
}


@pytest.mark.parametrize("platform", list(ASK))
def test_no_tool_arguments_make_a_server_error(
    webhook: httpx.Client, acme: httpx.Client, platform_sandbox: Sandbox, platform: str
) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(args=ARGUMENTS)
    def one(args: dict[str, Any]) -> None:
        call_id = new_id("call")
        result = ASK[platform](webhook, call_id, args)  # a 200 with a tool result, whatever the args
        if not_text(args) is not None:
            _refused(result, "params")
        if result.startswith("Not recorded"):
            _nothing_recorded(acme, platform_sandbox, platform, call_id, args)

    one()
