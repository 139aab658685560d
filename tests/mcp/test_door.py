"""The door of /mcp: a browser page of an origin not allowed is answered 403, and with API keys
configured a request without a valid key 401, both in the API's own error shape, before the MCP
transport reads it; a session stays its tenant's."""

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox, new_id
from tests.helpers import BOOKING
from tests.mcp.conftest import networked_endpoint
from tests.mcp.support import ALLOWED_ORIGIN, KEY_A, KEY_B, operation

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


EVIL_ORIGIN = "http://rebound.attacker.example"


@pytest.mark.parametrize("authorization", [None, f"Bearer {KEY_A}"])
def test_a_page_of_another_origin_is_refused_before_anything_is_read(
    keyed_stack: Stack, authorization: str | None
) -> None:
    headers = {**ACCEPT, "Origin": EVIL_ORIGIN, **({"Authorization": authorization} if authorization else {})}
    # Not even JSON: a 403 and not a 400 shows the body was never read.
    for body in (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"', b"{}"):
        answer = httpx.post(f"{keyed_stack.api_url}/mcp", content=body, headers=headers, timeout=10)
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "forbidden"
        assert "mcp-session-id" not in answer.headers


async def test_a_call_from_another_origin_records_nothing(keyed_stack: Stack, truth: AsyncSandbox) -> None:
    conversation = new_id("conv")
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "reservation", "arguments": BOOKING},
    }
    headers = {**ACCEPT, "Authorization": f"Bearer {KEY_A}", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient(base_url=keyed_stack.api_url, timeout=10) as http:
        opened = await http.post(f"/mcp?conversation={conversation}", json=INITIALIZE, headers=headers)
        session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        refused = await http.post(
            f"/mcp?conversation={conversation}", json=call, headers={**session, "Origin": EVIL_ORIGIN}
        )
        assert refused.status_code == 403, refused.text
        await http.delete("/mcp", headers=session)
    assert await truth.writes(f"tenant_a:{operation(conversation, 'reservation', BOOKING)}") == []


@pytest.mark.parametrize("origin", [ALLOWED_ORIGIN, ALLOWED_ORIGIN.upper(), None])
async def test_an_allowed_origin_or_none_is_served(keyed_stack: Stack, origin: str | None) -> None:
    headers = {"Origin": origin} if origin else {}
    endpoint = networked_endpoint(keyed_stack, "2026")
    async with endpoint.connect(KEY_A, new_id("conv"), headers=headers) as client:
        tools = await client.list_tools()
    assert "verify_action" in {tool.name for tool in tools.tools}
