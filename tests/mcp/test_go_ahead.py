"""The go-ahead through MCP elicitation, in the form each protocol revision uses: the person is asked
with the exact params; a yes sends the request once, recorded as authorized by "mcp elicitation"; a no
or a dismissal sends nothing and leaves the action requested."""

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.codec import data_converter
from settled.temporal.identity import action_workflow_id
from tests.client.support import AsyncSandbox, new_id, refund
from tests.mcp.support import KEY_A, Endpoint, answering, operation, text_of


async def _updates(stack: Stack, operation_id: str) -> list[str]:
    """The updates the action's workflow accepted, in order."""
    client = await Client.connect(stack.temporal_address, data_converter=data_converter({}))
    history = await client.get_workflow_handle(action_workflow_id("tenant_a", operation_id)).fetch_history()
    return [
        event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]


async def test_a_yes_sends_it_once(endpoint: Endpoint, truth: AsyncSandbox, keyed_stack: Stack) -> None:
    conversation, params = new_id("conv"), refund()
    elicit, asked = answering("accept", go_ahead=True)
    async with endpoint.connect(KEY_A, conversation, elicit=elicit) as client:
        result = await client.call_tool("refund", params)
    assert len(asked) == 1
    question = asked[0].message
    assert all(str(value) in question for value in params.values()), question
    status = result.structured_content
    assert not result.is_error and status is not None and status["state"] == "confirmed", text_of(result)
    assert any(entry["note"] == "authorized by mcp elicitation" for entry in status["log"]), status["log"]
    assert len(await truth.writes(f"tenant_a:{status['operation_id']}")) == 1
    # The call that brings the answer (2026-07-28) reads the action it recorded: no second create.
    assert await _updates(keyed_stack, status["operation_id"]) == ["authorize"]


@pytest.mark.parametrize(
    ("action", "told"), [("decline", "said no"), ("cancel", "closed the go-ahead question")]
)
async def test_a_no_or_a_dismissal_sends_nothing(
    endpoint: Endpoint, truth: AsyncSandbox, action: str, told: str
) -> None:
    conversation, params = new_id("conv"), refund()
    elicit, asked = answering(action)
    async with endpoint.connect(KEY_A, conversation, elicit=elicit) as client:
        result = await client.call_tool("refund", params)
        checked = await client.call_tool(
            "verify_action", {"operation_id": operation(conversation, "refund", params)}
        )
    assert len(asked) == 1
    status = result.structured_content
    assert not result.is_error and status is not None, text_of(result)
    assert (status["state"], status["authorized"], status["dispatched"]) == ("requested", False, False)
    assert told in text_of(result) and "nothing was sent" in text_of(result)
    assert checked.structured_content and checked.structured_content["actions"][0]["state"] == "requested"
    assert await truth.writes(f"tenant_a:{status['operation_id']}") == []


async def test_a_yes_declined_in_the_form_is_a_no(endpoint: Endpoint, truth: AsyncSandbox) -> None:
    conversation, params = new_id("conv"), refund()
    elicit, _ = answering("accept", go_ahead=False)
    async with endpoint.connect(KEY_A, conversation, elicit=elicit) as client:
        result = await client.call_tool("refund", params)
    assert result.structured_content and result.structured_content["state"] == "requested"
    assert await truth.writes(f"tenant_a:{result.structured_content['operation_id']}") == []


async def test_a_client_without_elicitation_uses_authorize_action(
    endpoint: Endpoint, truth: AsyncSandbox
) -> None:
    conversation, params = new_id("conv"), refund()
    async with endpoint.connect(KEY_A, conversation) as client:
        recorded = await client.call_tool("refund", params)
        assert recorded.structured_content and recorded.structured_content["state"] == "requested"
        operation_id = recorded.structured_content["operation_id"]
        assert f"call authorize_action with operation_id {operation_id}" in text_of(recorded)
        assert await truth.writes(f"tenant_a:{operation_id}") == []
        authorized = await client.call_tool("authorize_action", {"operation_id": operation_id})
    assert authorized.structured_content and authorized.structured_content["state"] == "confirmed"
    assert len(await truth.writes(f"tenant_a:{operation_id}")) == 1
