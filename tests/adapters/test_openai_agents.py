"""The OpenAI Agents SDK (realtime), driven for real through its model interface, offline.

The failure: a refund request is in flight at the service when the caller barges in. The SDK stops
only the audio and lets the tool finish; the service has applied the refund, but its answer is lost
(sandbox fault `hang` with `apply`, then the connection drops). The naive tool raises, the SDK
tells the model "An error occurred ... Please try again", the caller says "try again", and the
order is refunded twice.
With settled the tool reports verified state ("not confirmed yet"), the retry meets the same
durable action, and the service holds exactly one refund, which is what the agent finally says.
"""

import asyncio
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "agents", reason="the OpenAI Agents SDK is not installed: pip install 'settled[openai-agents]'"
)

from agents import FunctionTool, function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner, RealtimeSession
from agents.tool_context import ToolContext

from adapters.common import ActionKind, derived_operation_id
from adapters.openai_agents import SettledRealtime
from examples import openai_agents_refund
from examples.openai_agents_refund import ScriptedRealtimeModel, say_and_wait
from examples.scripted import RefundScript
from settled.stack import Stack
from settled.states import State
from tests.client.support import NOT_YET, AsyncSandbox, RecordingClient, eventually, new_id, refund


def naive_refund(sandbox_url: str) -> FunctionTool:
    """The refund tool as it is usually written: call the service, believe its answer."""

    @function_tool(name_override="refund")
    async def refund_tool(ctx: ToolContext[Any], order_id: str, amount: float, currency: str) -> str:
        """Refund the order."""
        body = {"order_id": order_id, "amount": amount, "currency": currency}
        async with httpx.AsyncClient(base_url=sandbox_url, timeout=10) as http:
            answer = await http.post("/refunds", json={**body, "client_reference": ctx.tool_call_id})
        answer.raise_for_status()
        return f"Tell the caller: Your refund has been submitted, reference {answer.json()['id']}."

    return refund_tool


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


async def test_naive_tool_refunds_twice_after_a_barge_in(stack: Stack, truth: AsyncSandbox) -> None:
    params, prefix = refund(), new_id("call")
    script = RefundScript(refund=params)
    model = ScriptedRealtimeModel(script, call_prefix=prefix)
    hang = await truth.fault("refunds", "create", "hang", f"{prefix}_1", apply=True)
    agent = RealtimeAgent(name="refunds", tools=[naive_refund(stack.sandbox_url)])
    session: RealtimeSession = await RealtimeRunner(agent, model=model).run()
    async with session:
        draining = asyncio.create_task(_drain(session))
        model.replied.clear()
        await session.send_message(f"Please refund order {params['order_id']}.")
        await truth.wait_in_flight(f"{prefix}_1")
        await model.barge_in()  # the SDK stops the audio; the tool runs on
        await truth.release(hang)  # applied, and the answer is lost
        await asyncio.wait_for(model.replied.wait(), 20)
        await say_and_wait(session, model, "Please try again.")
    await draining

    # The SDK's own answer for a tool that raised invites exactly the retry that refunds twice.
    assert script.said == [
        "An error occurred while running the tool. Please try again.",
        f"Your refund has been submitted, reference {script.said[1].rsplit(' ', 1)[1]}",
    ]
    assert len(await truth.refunds_for(params["order_id"])) == 2  # refunded twice


async def test_with_settled_the_claim_is_true_and_there_is_one_refund(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    op = derived_operation_id(conversation, "refund", params)
    script = RefundScript(refund=params)
    model = ScriptedRealtimeModel(script, call_prefix=new_id("call"))
    bridge = SettledRealtime(settled, conversation, [refund_kind], wait_s=0.2, authorize_on_call=True)
    hang = await truth.fault("refunds", "create", "hang", op, apply=True)
    agent = RealtimeAgent(name="refunds", tools=bridge.tools())
    session: RealtimeSession = await RealtimeRunner(agent, model=model).run()
    async with session:
        watching = asyncio.create_task(_drain(bridge.watch(session)))
        model.replied.clear()
        await session.send_message(f"Please refund order {params['order_id']}.")
        await truth.wait_in_flight(op)
        await asyncio.wait_for(model.replied.wait(), 20)  # the tool answered after its short wait
        assert script.said[-1] in NOT_YET
        await model.barge_in()  # cuts that sentence off
        await truth.release(hang)  # applied, and the answer is lost
        await eventually(lambda: _state_is(settled, op, State.CONFIRMED), what="the refund confirmed")
        await say_and_wait(session, model, "Please try again.")
        await say_and_wait(session, model, "Did you do it?")
    await watching
    await bridge.aclose()

    records = await truth.refunds_for(params["order_id"])
    action = await settled.get(op)
    assert len(records) == 1 and records[0]["key"] == op
    assert action.state is State.CONFIRMED and action.business_ref == records[0]["id"]
    assert f"Your reference is {records[0]['id']}." in script.said[1]  # the retry met the same action
    assert "CONFIRMED" in script.said[2] and records[0]["id"] in script.said[2]
    assert "unknown" in [entry.state for entry in action.history]  # the lost answer was checked
    assert settled.events == [("channel_opened", None), ("interrupted", None), ("channel_closed", "hangup")]
    assert action.presented is not None and action.presented.completed
    assert action.presented.state is State.CONFIRMED and records[0]["id"] in action.presented.text

    handoff = await settled.handoff(conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "hangup"
    assert handoff.work == "stopped" and handoff.say == ""  # spoken to the end: nothing owed


async def test_an_interrupted_confirmation_is_owed_to_the_next_channel(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    script = RefundScript(refund=params)
    model = ScriptedRealtimeModel(script, call_prefix=new_id("call"))
    bridge = SettledRealtime(settled, conversation, [refund_kind], wait_s=5, authorize_on_call=True)
    session = await RealtimeRunner(RealtimeAgent(name="r", tools=bridge.tools()), model=model).run()
    async with session:
        watching = asyncio.create_task(_drain(bridge.watch(session)))
        await say_and_wait(session, model, f"Please refund order {params['order_id']}.")
        await model.barge_in()  # the caller cuts the confirmation off, then hangs up
    await watching
    await bridge.aclose()

    records = await truth.refunds_for(params["order_id"])
    action = await settled.get(derived_operation_id(conversation, "refund", params))
    assert script.said[0] == action.say and records[0]["id"] in action.say
    assert action.presented is not None and action.presented.completed is False
    handoff = await settled.handoff(conversation)
    assert handoff.say == action.say  # the text channel re-delivers what the call never finished


async def test_a_go_ahead_is_asked_for_when_the_call_is_not_the_authorization(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    bridge = SettledRealtime(settled, conversation, [refund_kind], wait_s=5)
    tools = {tool.name: tool for tool in bridge.tools()}
    assert set(tools) == {"refund", "verify_action", "authorize_action"}
    session = await RealtimeRunner(RealtimeAgent(name="r", tools=list(tools.values())), model=_Quiet()).run()
    async with session:
        asked = await bridge.settled.answer_request("refund", params)
        op = derived_operation_id(conversation, "refund", params)
        assert f"call authorize_action with operation_id {op}" in asked
        assert await truth.refunds_for(params["order_id"]) == []  # nothing is sent before the go-ahead
        done = await bridge.settled.answer_authorize(op)
    assert done.startswith("CONFIRMED") and len(await truth.refunds_for(params["order_id"])) == 1


class _Quiet(ScriptedRealtimeModel):
    def __init__(self) -> None:
        super().__init__(RefundScript(refund={}))


async def _state_is(settled: RecordingClient, op: str, state: State) -> bool:
    return (await settled.get(op)).state is state


async def test_the_example_runs_against_the_stack(stack: Stack, truth: AsyncSandbox) -> None:
    conversation, order = new_id("conv"), new_id("order")
    result = await openai_agents_refund.call(stack.api_url, conversation, order)
    records = await truth.refunds_for(order)
    assert len(records) == 1 and all(records[0]["id"] in line for line in result["said"])
    assert result["handoff"].channels.voice == "closed" and result["handoff"].work == "stopped"
