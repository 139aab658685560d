"""The door of /mcp: with API keys configured, a request without a valid key is answered 401 in the
API's own error shape, before the MCP transport reads it; a session stays its tenant's."""

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from settled.runtime.stack import Stack
from tests.client.support import new_id
from tests.mcp.support import KEY_A, KEY_B

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-key-at-all", f"Basic {KEY_A}"])
def test_without_a_valid_key_the_answer_is_401(keyed_stack: Stack, authorization: str | None) -> None:
    headers = {**ACCEPT, **({"Authorization": authorization} if authorization else {})}
    answer = httpx.post(f"{keyed_stack.api_url}/mcp", json=INITIALIZE, headers=headers, timeout=10)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "unauthorized"
    assert "not-a-key-at-all" not in answer.text and KEY_A not in answer.text  # never quoted back
    assert answer.headers["www-authenticate"] == "Bearer"


async def test_the_mcp_client_without_a_key_is_refused(keyed_stack: Stack) -> None:
    statuses: list[int] = []

    async def noted(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    url = f"{keyed_stack.api_url}/mcp?conversation={new_id('conv')}"
    async with httpx2.AsyncClient(event_hooks={"response": [noted]}) as http:
        with pytest.raises(ExceptionGroup) as refused:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy"):
                pass
    assert refused.group_contains(MCPError) and statuses == [401]


def test_a_session_answers_only_its_own_tenant(keyed_stack: Stack) -> None:
    with httpx.Client(base_url=keyed_stack.api_url, timeout=10) as http:
        opened = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {KEY_A}"})
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        stranger = {**ACCEPT, "Authorization": f"Bearer {KEY_B}", "Mcp-Session-Id": session}
        assert http.post("/mcp", json=ping, headers=stranger).status_code == 404
        http.delete("/mcp", headers={"Authorization": f"Bearer {KEY_A}", "Mcp-Session-Id": session})
