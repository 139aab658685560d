"""Each action is the resource `settled://actions/{operation_id}`: a client that lost a slow call
reconnects, asks again (the same action: nothing is sent twice), subscribes, and is told when the
late truth arrives; a tenant cannot read another's."""

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.client.support import AsyncSandbox, new_id
from tests.helpers import BOOKING
from tests.mcp.support import KEY_A, KEY_B, LEGACY, Endpoint, operation, text_of

KIND = "reservation"
# The 2025 revision's subscribe is what a 2025 client sends; the SDK warns that 2026 removed it.
pytestmark = pytest.mark.filterwarnings("ignore:resources/subscribe is removed:UserWarning")
UPDATE_WITHIN_S = 30.0


def uri(operation_id: str) -> str:
    return f"settled://actions/{operation_id}"


async def read(client: Client, operation_id: str) -> dict[str, Any]:
    contents = (await client.read_resource(uri(operation_id))).contents
    assert isinstance(contents[0], types.TextResourceContents) and contents[0].mime_type == "application/json"
    status: dict[str, Any] = json.loads(contents[0].text)
    return status


@asynccontextmanager
async def subscribed(
    endpoint: Endpoint, conversation: str, operation_id: str
) -> AsyncIterator[tuple[Client, asyncio.Queue[str]]]:
    """A client subscribed to the action's resource, and the URIs it is told were updated, in the way of
    its revision: `resources/subscribe` (told on the session's stream) or a `subscriptions/listen` stream."""
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.put_nowait(message.params.uri)

    async with endpoint.connect(KEY_A, conversation, on_message=on_message) as client:
        if endpoint.mode == LEGACY:
            await client.session.subscribe_resource(uri(operation_id))
            yield client, updated
            return
        async with client.listen(resource_subscriptions=[uri(operation_id)]) as listening:
            assert listening.honored.resource_subscriptions == [uri(operation_id)]

            async def relay() -> None:
                async for event in listening:
                    updated.put_nowait(event.uri)  # type: ignore[union-attr]

            relaying = asyncio.ensure_future(relay())
            try:
                yield client, updated
            finally:
                relaying.cancel()


async def test_a_reconnect_mid_slow_call_sends_once_and_the_resource_tells_the_end(
    networked: Endpoint, truth: AsyncSandbox
) -> None:
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    op = operation(conversation, KIND, params)
    key = f"tenant_a:{op}"
    hold = await truth.fault("bookings", "create", "hold", key, apply=True)
    async with networked.connect(KEY_A, conversation) as first:
        call = asyncio.ensure_future(first.call_tool(KIND, params))
        await truth.wait_held(key)
        call.cancel()  # the client goes away while the write is at the service
        with pytest.raises(asyncio.CancelledError):
            await call
    async with subscribed(networked, conversation, op) as (client, updated):
        again = await client.call_tool(KIND, params)  # the model asks again after the reconnect
        assert again.structured_content is not None, text_of(again)
        assert again.structured_content["operation_id"] == op
        assert again.structured_content["state"] == "running" and "not confirmed yet" in text_of(again)
        assert (await read(client, op))["state"] == "running"
        await truth.release(hold)
        async with asyncio.timeout(UPDATE_WITHIN_S):
            while (status := await read(client, op))["state"] == "running":
                assert await updated.get() == uri(op)
    assert status["state"] == "confirmed" and status["business_ref"]
    assert len(await truth.writes(key)) == 1


async def test_a_tenant_cannot_read_anothers_resource(endpoint: Endpoint) -> None:
    conversation = new_id("conv")
    async with endpoint.connect(KEY_A, conversation) as owner:
        result = await owner.call_tool(KIND, {**BOOKING, "room": new_id("room")})
        assert result.structured_content is not None
        op = result.structured_content["operation_id"]
        assert (await read(owner, op))["state"] == "confirmed"
        listed = (await owner.list_resources()).resources
        assert [str(resource.uri) for resource in listed] == [uri(op)]
    async with endpoint.connect(KEY_B, conversation) as stranger:
        with pytest.raises(MCPError) as refused:
            await read(stranger, op)
        assert "no action" in str(refused.value)
        checked = await stranger.call_tool("verify_action", {"operation_id": op})
        assert checked.is_error
        authorized = await stranger.call_tool("authorize_action", {"operation_id": op})
        assert authorized.is_error and authorized.structured_content is None
        assert (await stranger.list_resources()).resources == []  # its own conversation of that name


async def test_a_tenant_cannot_subscribe_to_anothers_resource(networked: Endpoint) -> None:
    conversation = new_id("conv")
    async with networked.connect(KEY_A, conversation) as owner:
        result = await owner.call_tool(KIND, {**BOOKING, "room": new_id("room")})
        assert result.structured_content is not None
        op = result.structured_content["operation_id"]
    async with networked.connect(KEY_B, conversation) as stranger:
        if networked.mode == LEGACY:
            with pytest.raises(MCPError):
                await stranger.session.subscribe_resource(uri(op))
        else:
            async with stranger.listen(resource_subscriptions=[uri(op)]) as listening:
                assert not listening.honored.resource_subscriptions
