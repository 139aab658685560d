"""Pipecat, driven for real: a pipeline of Pipecat's own context aggregators and LLM service
machinery, with a scripted LLM and a scripted output transport, fed test frames. Offline.

The failure: a refund request is at the service when the caller cuts in. Pipecat cancels the call
(the default, `cancel_on_interruption=True`) and tells the model it did not complete, though the
service has applied it; the caller says "try again", and the order is refunded twice. With settled
the call is registered with `cancel_on_interruption=False`, the model is told "not confirmed yet"
and then the verified outcome, a retry meets the same durable action, and there is one refund.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

pytest.importorskip("pipecat", reason="Pipecat is not installed: pip install 'settled[pipecat]'")

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import CancelFrame, EndFrame, InterruptionFrame
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.workers.runner import WorkerRunner

from adapters.common import ActionKind, derived_operation_id
from adapters.pipecat import SettledPipecat
from examples import pipecat_refund
from examples.pipecat_refund import ScriptedLLM, build, say
from examples.scripted import RefundScript
from settled.stack import Stack
from settled.states import State
from tests.client.support import NOT_YET, AsyncSandbox, RecordingClient, eventually, new_id, refund


@asynccontextmanager
async def running(worker: PipelineWorker, end: type = EndFrame) -> AsyncIterator[None]:
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    task = asyncio.create_task(runner.run())
    try:
        yield
    finally:
        await worker.queue_frame(end())  # the caller hangs up (EndFrame) or the line drops
        await asyncio.wait_for(task, 20)


async def _cancelled_in(context: LLMContext) -> bool:
    return any(isinstance(m, dict) and m.get("content") == "CANCELLED" for m in context.messages)


async def said(script: RefundScript, count: int) -> None:
    await eventually(lambda: _has(script, count), what=f"{count} lines said")


async def _has(script: RefundScript, count: int) -> bool:
    return len(script.said) >= count


async def test_naive_call_is_cancelled_by_the_interruption_and_the_retry_refunds_twice(
    stack: Stack, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    params, prefix = refund(), new_id("call")
    script = RefundScript(refund=params)
    llm = ScriptedLLM(script, call_prefix=prefix)

    async def naive_refund(call: FunctionCallParams) -> None:
        body = {**call.arguments, "client_reference": call.tool_call_id}
        async with httpx.AsyncClient(base_url=stack.sandbox_url, timeout=10) as http:
            answer = await http.post("/refunds", json=body)
        answer.raise_for_status()
        await call.result_callback(f"Tell the caller: Your refund has been submitted, {answer.json()['id']}.")

    llm.register_function("refund", naive_refund)  # Pipecat's default: cancel on interruption
    await truth.fault("refunds", "create", "hang", f"{prefix}_1", apply=True)
    schema = refund_kind.params_schema
    tools = ToolsSchema(
        [FunctionSchema("refund", "Refund the order.", schema["properties"], schema["required"])]
    )
    bot = build(llm, None, tools=tools)
    worker = bot.worker
    async with running(worker):
        await say(worker, llm, f"Please refund order {params['order_id']}.", wait=False)
        await truth.wait_in_flight(f"{prefix}_1")  # applied at the service, the answer not back yet
        await worker.queue_frame(InterruptionFrame())  # the caller cuts in
        await eventually(lambda: _cancelled_in(bot.context), what="the call settled as CANCELLED")
        await say(worker, llm, "Sorry, go on.")
        await say(worker, llm, "Please try again.")

    assert script.said[0] == "Sorry, the refund didn't go through."  # what Pipecat told the model
    assert script.said[1].startswith("Your refund has been submitted")
    assert len(await truth.refunds_for(params["order_id"])) == 2  # refunded twice


async def test_with_settled_the_interruption_cancels_nothing_and_there_is_one_refund(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    op = derived_operation_id(conversation, "refund", params)
    script = RefundScript(refund=params)
    llm = ScriptedLLM(script, call_prefix=new_id("call"))
    bridge = SettledPipecat(settled, conversation, [refund_kind], wait_s=0.2, authorize_on_call=True)
    bridge.register(llm)
    await truth.fault("refunds", "create", "hang", op, apply=True)
    bot = build(llm, bridge, tools=bridge.tools_schema())
    worker, speaker = bot.worker, bot.speaker
    async with running(worker):
        bridge.settled.opened()
        speaker.hold = True  # the next answer is still playing when the caller cuts in
        await say(worker, llm, f"Please refund order {params['order_id']}.", wait=False)
        await truth.wait_in_flight(op)
        await said(script, 1)
        assert script.said[0] in NOT_YET
        await asyncio.wait_for(speaker.playing.wait(), 10)
        await worker.queue_frame(InterruptionFrame())
        await said(script, 2)  # the outcome, once settled has it (the call was not cancelled)
        await say(worker, llm, "Please try again.")
        await say(worker, llm, "Did you do it?")
    await bridge.aclose()

    records = await truth.refunds_for(params["order_id"])
    action = await settled.get(op)
    ref = records[0]["id"]
    assert len(records) == 1 and records[0]["key"] == op
    assert action.state is State.CONFIRMED and action.business_ref == ref
    assert script.said[1] == script.said[2] == action.say and ref in action.say
    assert "CONFIRMED" in script.said[3] and ref in script.said[3]
    assert "unknown" in [entry.state for entry in action.history]
    assert settled.events == [("channel_opened", None), ("interrupted", None), ("channel_closed", "hangup")]
    assert action.presented is not None and action.presented.completed
    assert action.presented.state is State.CONFIRMED

    handoff = await settled.handoff(conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "hangup"
    assert handoff.say == ""


async def test_a_dropped_pipeline_leaves_the_action_running_and_the_handoff_tells_it(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    op = derived_operation_id(conversation, "refund", params)
    script = RefundScript(refund=params)
    llm = ScriptedLLM(script, call_prefix=new_id("call"))
    bridge = SettledPipecat(settled, conversation, [refund_kind], wait_s=0.5, authorize_on_call=True)
    bridge.register(llm)
    hold = await truth.fault("refunds", "create", "hold", op, apply=True)
    worker = build(llm, bridge, tools=bridge.tools_schema()).worker
    async with running(worker, end=CancelFrame):
        await say(worker, llm, f"Please refund order {params['order_id']}.", wait=False)
        await said(script, 1)
    await bridge.aclose()

    handoff = await settled.handoff(conversation)
    assert handoff.channel_reasons["voice"] == "dropped" and handoff.work == "continuing"
    assert await truth.refunds_for(params["order_id"]) == []
    await truth.release(hold)  # the call is gone; the action is not
    await eventually(lambda: _confirmed(settled, op), what="the refund confirmed after the drop")
    handoff = await settled.handoff(conversation)
    ref = (await truth.refunds_for(params["order_id"]))[0]["id"]
    assert handoff.work == "stopped" and ref in handoff.say  # owed to the next channel


async def _confirmed(settled: RecordingClient, op: str) -> bool:
    return (await settled.get(op)).state is State.CONFIRMED


async def test_the_example_runs_against_the_stack(stack: Stack, truth: AsyncSandbox) -> None:
    conversation, order = new_id("conv"), new_id("order")
    result = await pipecat_refund.call(stack.api_url, conversation, order)
    records = await truth.refunds_for(order)
    assert len(records) == 1 and all(records[0]["id"] in line for line in result["said"])
    assert result["handoff"].channels.voice == "closed" and result["handoff"].work == "stopped"
