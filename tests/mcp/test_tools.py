"""`tools/list` and `tools/call` with the `mcp` package's own client, judged by the sandbox's records:
one call confirms once, a repeated call sends nothing more, a refusal names the field."""

import itertools
from dataclasses import replace

import pytest
from mcp.shared.exceptions import MCPError
from settled.bench.actions import billed_in_events
from temporalio.client import Client

from settled.runtime.stack import Stack, free_port
from settled.temporal.codec import data_converter
from settled.temporal.identity import action_workflow_id
from tests.client.support import AsyncSandbox, closed_run_billed, new_id
from tests.helpers import BOOKING
from tests.mcp.conftest import app_settings, in_process, networked_endpoint
from tests.mcp.support import KEY_A, Endpoint, operation, text_of

KIND = "reservation"  # the room booking without a go-ahead


async def test_the_tools_are_the_adapters_tool_set(endpoint: Endpoint) -> None:
    async with endpoint.connect(KEY_A, new_id("conv")) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"refund", "room_booking", KIND, "verify_action", "authorize_action"} <= set(tools)
    booking = tools[KIND]
    assert booking.input_schema["required"] == ["room", "day"] or set(booking.input_schema["required"]) == {
        "room",
        "day",
    }
    assert booking.output_schema is not None and "operation_id" in booking.output_schema["properties"]
    hints = booking.annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        False,
        True,
        True,
        True,
    )
    assert tools["verify_action"].annotations and tools["verify_action"].annotations.read_only_hint is True


async def test_a_call_is_confirmed_once_with_its_progress(endpoint: Endpoint, truth: AsyncSandbox) -> None:
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    progress: list[str] = []

    async def noted(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with endpoint.connect(KEY_A, conversation) as client:
        result = await client.call_tool(KIND, params, progress_callback=noted)
    assert not result.is_error, text_of(result)
    status = result.structured_content
    assert status is not None and status["state"] == "confirmed", status
    assert status["operation_id"] == operation(conversation, KIND, params)
    assert "CONFIRMED" in text_of(result) and status["say"] in text_of(result)
    assert progress and progress[-1].startswith("confirmed: "), progress
    states = [line.partition(":")[0] for line in progress]
    assert all(a != b for a, b in itertools.pairwise(states)), states  # one per state passed
    assert len(await truth.writes(f"tenant_a:{status['operation_id']}")) == 1


async def test_a_call_carries_its_wait_so_a_deduplicating_send_runs_inside_the_workflow_task(
    keyed_stack: Stack, truth: AsyncSandbox
) -> None:
    """The tool call waits for its caller anyway; its create says so, so the booking (a deduplicating
    kind with an authoritative lookup) is sent inside the workflow task: a local activity, no activity,
    and one state upsert, while the progress still names each state the action passed."""
    settings = replace(app_settings(keyed_stack), mcp_wait_s=25.0)  # longer than the kind's 20 s timeout
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    progress: list[str] = []

    async def noted(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with in_process(settings) as endpoint, endpoint.connect(KEY_A, conversation) as client:
        result = await client.call_tool(KIND, params, progress_callback=noted)
    status = result.structured_content
    assert status is not None and status["state"] == "confirmed", text_of(result)
    # One notification per state of its record, in order, though all were passed while the create waited.
    passed = [state for state, _ in itertools.groupby(entry["state"] for entry in status["history"])]
    assert [line.partition(":")[0] for line in progress] == passed, progress
    assert passed[0] == "requested" and passed[-1] == "confirmed"
    temporal = await Client.connect(keyed_stack.temporal_address, data_converter=data_converter({}))
    workflow_id = action_workflow_id("tenant_a", status["operation_id"])
    billed = billed_in_events((await temporal.get_workflow_handle(workflow_id).fetch_history()).events).counts
    assert (billed["local activity"], billed["activity"], billed["search-attribute upsert"]) == (1, 0, 1)
    assert len(await truth.writes(f"tenant_a:{status['operation_id']}")) == 1


async def test_a_confirmed_calls_run_closes_at_once_with_no_timer(
    keyed_stack: Stack, truth: AsyncSandbox
) -> None:
    """An MCP client's model sees the answer, never the person, so no `presented` follows: the action
    does not linger for one, and its run closes in the task it is confirmed in (no timer)."""
    conversation, params = new_id("conv"), {**BOOKING, "room": new_id("room")}
    async with networked_endpoint(keyed_stack, "2026").connect(KEY_A, conversation) as client:
        result = await client.call_tool(KIND, params)
    status = result.structured_content
    assert status is not None and status["state"] == "confirmed", text_of(result)
    workflow_id = action_workflow_id("tenant_a", status["operation_id"])
    closed = await closed_run_billed(keyed_stack.temporal_address, workflow_id)
    assert (closed.counts["workflow started"], closed.counts["timer"]) == (1, 0), closed.counts
    assert len(await truth.writes(f"tenant_a:{status['operation_id']}")) == 1


async def test_a_repeated_call_sends_once(endpoint: Endpoint, truth: AsyncSandbox) -> None:
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    async with endpoint.connect(KEY_A, conversation) as client:
        first = await client.call_tool(KIND, params)
    async with endpoint.connect(KEY_A, conversation) as client:  # a new session, the same conversation
        again = await client.call_tool(KIND, dict(reversed(params.items())))
    assert first.structured_content and again.structured_content
    assert again.structured_content["operation_id"] == first.structured_content["operation_id"]
    assert again.structured_content["state"] == "confirmed"
    async with endpoint.connect(KEY_A, conversation) as client:
        checked = await client.call_tool("verify_action", {})
    assert checked.structured_content is not None and not checked.is_error
    assert [action["operation_id"] for action in checked.structured_content["actions"]] == [
        first.structured_content["operation_id"]
    ]
    assert "CONFIRMED" in text_of(checked) and KEY_A not in text_of(checked)
    assert len(await truth.writes(f"tenant_a:{first.structured_content['operation_id']}")) == 1


async def test_invalid_params_are_refused_naming_the_field(endpoint: Endpoint, truth: AsyncSandbox) -> None:
    conversation = new_id("conv")
    params = {"room": new_id("room"), "day": 7}
    async with endpoint.connect(KEY_A, conversation) as client:
        result = await client.call_tool(KIND, params)
        unknown = await client.call_tool("teleport", {})
    assert result.is_error and result.structured_content is None
    assert "day" in text_of(result) and "Nothing was sent" in text_of(result), text_of(result)
    assert await truth.writes(f"tenant_a:{operation(conversation, KIND, params)}") == []
    assert unknown.is_error and "teleport" in text_of(unknown)


async def test_a_failed_action_is_a_true_answer_not_a_tool_error(
    endpoint: Endpoint, truth: AsyncSandbox
) -> None:
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    await truth.fault("bookings", "create", "reject", f"tenant_a:{operation(conversation, KIND, params)}")
    async with endpoint.connect(KEY_A, conversation) as client:
        result = await client.call_tool(KIND, params)
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["state"] == "failed" and "NOT DONE" in text_of(result)


async def test_without_a_conversation_a_2026_client_is_told_to_name_one(keyed_stack: Stack) -> None:
    endpoint = networked_endpoint(keyed_stack, "2026")
    async with endpoint.connect(KEY_A) as client:
        result = await client.call_tool(KIND, {**BOOKING, "room": new_id("room")})
    assert result.is_error and "conversation" in text_of(result)


async def test_a_2025_session_names_the_conversation_by_default(keyed_stack: Stack) -> None:
    endpoint = networked_endpoint(keyed_stack, "2025")
    async with endpoint.connect(KEY_A) as client:
        result = await client.call_tool(KIND, {**BOOKING, "room": new_id("room")})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["conversation_id"].startswith("mcp:")


async def test_the_header_names_the_conversation(endpoint: Endpoint) -> None:
    conversation = new_id("conv")
    async with endpoint.connect(KEY_A, headers={"Settled-Conversation": conversation}) as client:
        result = await client.call_tool(KIND, {**BOOKING, "room": new_id("room")})
    assert (
        result.structured_content is not None and result.structured_content["conversation_id"] == conversation
    )


async def test_when_temporal_is_out_of_reach_the_call_says_so(keyed_stack: Stack) -> None:
    """Not a refusal and not an answer about the action: a JSON-RPC error, saying that nothing may be
    said to be done and that asking again is safe."""
    settings = replace(app_settings(keyed_stack), temporal_address=f"127.0.0.1:{free_port()}")
    async with in_process(settings) as endpoint, endpoint.connect(KEY_A, new_id("conv")) as client:
        with pytest.raises(MCPError) as unavailable:
            await client.call_tool(KIND, {**BOOKING, "room": new_id("room")})
    assert "temporal_unavailable" in unavailable.value.error.message
    assert "Calling again with the same details is safe" in unavailable.value.error.message


async def test_asked_again_with_5_0_for_5_the_refund_is_one_action_and_one_write(
    endpoint: Endpoint, truth: AsyncSandbox
) -> None:
    conversation, order = new_id("conv"), new_id("order")
    params = {"order_id": order, "amount": 5, "currency": "EUR", "items": [{"sku": "é", "n": 1}]}
    async with endpoint.connect(KEY_A, conversation) as client:
        first = await client.call_tool("refund_nodedup", params)
        again = await client.call_tool(
            "refund_nodedup",
            {"items": [{"n": 1.0, "sku": "é"}], "currency": "EUR", "amount": 5.0, "order_id": order},
        )
        other = await client.call_tool("refund_nodedup", {**params, "amount": 5.1})
    assert first.structured_content and again.structured_content and other.structured_content
    op = first.structured_content["operation_id"]
    assert again.structured_content["operation_id"] == op and again.structured_content["attempts"] == 1
    assert other.structured_content["operation_id"] != op
    assert len(await truth.writes(f"tenant_a:{op}")) == 1
