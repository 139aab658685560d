"""LiveKit Agents' and Pipecat's own MCP clients connect to /mcp as docs/mcp.md shows, and are offered
settled's tool set (they speak the 2025-11-25 revision: the handshake and a session)."""

import pytest

from settled.runtime.stack import Stack
from tests.mcp.support import KEY_A

TOOLS = {"reservation", "refund", "verify_action", "authorize_action"}


async def test_livekit_agents_lists_the_tools(keyed_stack: Stack) -> None:
    # LiveKit Agents before 1.7 (what the lock holds beside google-adk, whose opentelemetry cap keeps
    # LiveKit below 1.7) cannot import the mcp package of today: tests/installs runs this test beside
    # LiveKit's newest release.
    mcp = pytest.importorskip(
        "livekit.agents.llm.mcp",
        reason="LiveKit Agents' MCP integration cannot be imported here (pip install 'settled[livekit]')",
        exc_type=ImportError,
    )
    server = mcp.MCPServerHTTP(
        url=f"{keyed_stack.api_url}/mcp?conversation=livekit:room-1",
        transport_type="streamable_http",
        headers={"Authorization": f"Bearer {KEY_A}"},
        client_session_timeout_seconds=15,
    )
    await server.initialize()
    try:
        names = {tool.info.name for tool in await server.list_tools()}
    finally:
        await server.aclose()
    assert names >= TOOLS


async def test_pipecat_lists_the_tools(keyed_stack: Stack) -> None:
    service = pytest.importorskip("pipecat.services.mcp_service", reason="pip install 'settled[pipecat]'")
    from mcp.client.session_group import StreamableHttpParameters

    client = service.MCPClient(
        server_params=StreamableHttpParameters(
            url=f"{keyed_stack.api_url}/mcp?conversation=pipecat:session-1",
            headers={"Authorization": f"Bearer {KEY_A}"},
            timeout=15,
        )
    )
    try:
        names = {schema.name for schema in (await client.tools()).standard_tools}
    finally:
        await client.close()
    assert names >= TOOLS
