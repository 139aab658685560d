"""No input makes /mcp fail: tool arguments that are no Unicode text (a lone surrogate, which JSON's
escapes carry) and arguments of any shape the `mcp` package's own client can send are refused or
answered, never a server error, and a refused call records nothing (the conversation stays idle, the
sandbox sees no write)."""

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from settled.domain.canonical import not_text
from settled.runtime.stack import Stack
from tests.any_input import ANY_OBJECT, LEAVES, TEXT
from tests.client.support import new_id
from tests.mcp.support import KEY_A, operation

KIND = "reservation"  # the room booking without a go-ahead
PROTOCOL = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {KEY_A}"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
LONE = "\\ud800"  # JSON's escape of a lone surrogate, written raw
# Enough to meet every shape of argument, few enough to stay a few seconds (each is a few requests).
EXAMPLES = 25


def _call(http: httpx.Client, conversation: str, arguments: str, tool: str = KIND) -> httpx.Response:
    """A tools/call whose arguments are raw JSON text, in a session of its own."""
    opened = http.post(f"/mcp?conversation={conversation}", json=INITIALIZE, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    session = {**ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
    http.post(
        f"/mcp?conversation={conversation}",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=session,
    )
    raw = (
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
        f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
    )
    try:
        return http.post(
            f"/mcp?conversation={conversation}",
            content=raw.encode(),
            headers={**session, "Content-Type": "application/json"},
        )
    finally:
        http.delete("/mcp", headers=session)


def _judged(http: httpx.Client, arguments: str) -> bool:
    """Send one call; whether it was refused. Never a server error; a refused call records nothing:
    no action of its derived id, none in its conversation."""
    conversation = new_id("conv")
    answer = _call(http, conversation, arguments)
    assert answer.status_code < 500, answer.text
    assert "Traceback" not in answer.text
    refused = '"isError":true' in answer.text or answer.status_code >= 400 or '"error":' in answer.text
    params = json.loads(arguments)
    if refused and isinstance(params, dict):
        op = operation(conversation, KIND, params)
        assert http.get(f"/v1/actions/{op}", headers=ACCEPT).status_code == 404
        handoff = http.get(f"/v1/conversations/{conversation}/handoff", headers=ACCEPT).json()
        assert handoff["actions"] == [], handoff
    return refused


@pytest.mark.parametrize(
    "arguments",
    [
        f'{{"room": "Ada{LONE}", "day": "Thursday"}}',
        f'{{"room": "Ada", "day": "Thursday", "{LONE}": 1}}',
        f'{{"room": "Ada", "day": "Thursday", "note": [{{"x": "{LONE}"}}]}}',
    ],
)
def test_arguments_that_are_not_text_are_refused_and_record_nothing(
    keyed_stack: Stack, arguments: str
) -> None:
    with httpx.Client(base_url=keyed_stack.api_url, timeout=40) as http:
        assert _judged(http, arguments)


ARGUMENTS = ANY_OBJECT
BOOKINGS = st.fixed_dictionaries({"room": TEXT, "day": TEXT}, optional={"note": LEAVES})


def test_no_tool_arguments_make_a_server_error(keyed_stack: Stack) -> None:
    """Arguments of any shape and text, as JSON (lone surrogates as escapes): refused or answered."""
    with httpx.Client(base_url=keyed_stack.api_url, timeout=40) as http:

        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(arguments=ARGUMENTS | BOOKINGS)
        def one(arguments: dict[str, Any]) -> None:
            refused = _judged(http, json.dumps(arguments))
            if not_text(arguments) is not None:
                assert refused, arguments

        one()
