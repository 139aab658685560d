"""The OpenAI Agents SDK's own MCP client (`MCPServerStreamableHttp`) against /mcp: the framework
lists settled's tools and calls one the way it does in production, driven by a scripted model (no
model calls), and the sandbox holds one booking however often the run asks."""

import json
from typing import Any

import pytest

pytest.importorskip(
    "agents", reason="the OpenAI Agents SDK is not installed: pip install 'settled[openai-agents]'"
)

from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.mcp import MCPServerStreamableHttp
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox, new_id
from tests.helpers import BOOKING
from tests.mcp.support import KEY_A, operation

KIND = "reservation"


class BookingModel(Model):
    """Asks for the booking once, then answers with what the tool said: what a model would do."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.offered: list[str] = []
        self.tool_output = ""

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.offered = [tool.name for tool in tools]
        outputs = [
            item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=new_id("call"),
                name=KIND,
                arguments=json.dumps(self.params),
                id=new_id("fc"),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        self.tool_output = json.dumps(outputs[-1]["output"])
        text = ResponseOutputText(type="output_text", text="The room is booked.", annotations=[])
        message = ResponseOutputMessage(
            id=new_id("msg"), type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def test_the_agents_sdk_lists_and_calls_settled_over_mcp(
    keyed_stack: Stack, truth: AsyncSandbox
) -> None:
    conversation = new_id("conv")
    params = {**BOOKING, "room": new_id("room")}
    server = MCPServerStreamableHttp(
        params={
            "url": f"{keyed_stack.api_url}/mcp?conversation={conversation}",
            "headers": {"Authorization": f"Bearer {KEY_A}"},
        },
        name="settled",
        cache_tools_list=True,
    )
    async with server:
        for _ in range(2):  # the same request twice: one action, one write
            model = BookingModel(params)
            agent = Agent(name="front desk", instructions="Book rooms.", mcp_servers=[server])
            result = await Runner.run(
                agent, "Book the room", run_config=RunConfig(model=model, tracing_disabled=True)
            )
            assert result.final_output == "The room is booked."
            assert {KIND, "verify_action", "authorize_action"} <= set(model.offered)
            assert "CONFIRMED" in model.tool_output, model.tool_output
    assert len(await truth.writes(f"tenant_a:{operation(conversation, KIND, params)}")) == 1
