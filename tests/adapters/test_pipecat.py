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
from dataclasses import dataclass

import httpx
import pytest

pytest.importorskip("pipecat", reason="Pipecat is not installed: pip install 'settled[pipecat]'")

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import CancelFrame, EndFrame, Frame, InterruptionFrame
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import FunctionCallParams
from pipecat.workers.runner import WorkerRunner
from settled.adapters.common import ActionKind, derived_operation_id
from settled.adapters.pipecat import SettledPipecat

from examples import pipecat_refund
from examples.pipecat_refund import Bot, ScriptedLLM, ScriptedTTS, build, say
from examples.scripted import FILLER, HOLDING, RefundScript
from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.adapters.conftest import SentClient
from tests.adapters.heard import (
    CUT_BY_THE_HANG_UP,
    HEARD_AFTER_A_BARGE_IN,
    Caller,
    heard_in_full,
    met_once,
    owed,
    recorded_heard,
    sent,
    written_otherwise,
)
from tests.client.support import NOT_YET, AsyncSandbox, RecordingClient, eventually, new_id, refund

# How long the TTS speaks per character, played in real time: the confirmation lasts about 1 s.
MS_PER_CHAR = 12.0


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
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, wait_s=0.2)
    await truth.fault("refunds", "create", "hang", caller.op, apply=True)
    async with call(caller) as c:
        script, speaker = c.script, c.bot.speaker
        await say(c.worker, c.llm, caller.asks, wait=False)
        await truth.wait_in_flight(caller.op)
        await said(script, 1)
        assert script.said[0] in NOT_YET
        await speaker.until(script.said[0], heard_ms=100)  # still playing when the caller cuts in
        await c.worker.queue_frame(InterruptionFrame())
        await said(script, 2)  # the outcome, once settled has it (the call was not cancelled)
        await say(c.worker, c.llm, "Please try again.")
        await say(c.worker, c.llm, "Did you do it?")
        await speaker.until(script.said[-1])  # heard to its end, then the caller hangs up
        await eventually(lambda: recorded_heard(caller), what="the answer recorded as heard")

    records = await truth.refunds_for(caller.params["order_id"])
    action = await settled.get(caller.op)
    ref = records[0]["id"]
    assert len(records) == 1 and records[0]["key"] == caller.op
    assert action.state is State.CONFIRMED and action.business_ref == ref
    assert script.said[1] == script.said[2] == action.say and ref in action.say
    assert "CONFIRMED" in script.said[3] and ref in script.said[3]
    assert "unknown" in [entry.state for entry in action.history]
    assert settled.events == [("channel_opened", None), ("interrupted", None), ("channel_closed", "hangup")]
    assert action.presented is not None and action.presented.completed
    assert action.presented.state is State.CONFIRMED

    handoff = await settled.handoff(caller.conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "hangup"
    assert handoff.say == ""


@pytest.mark.parametrize("end", [EndFrame, CancelFrame], ids=["EndFrame", "CancelFrame"])
@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind, end: type[Frame], chunk_ms: int | None
) -> None:
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller, end=end) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until("Done:", heard_ms=300)  # the caller hangs up 0.3 s in
    assert c.bot.speaker.heard_of("Done:") < _length(c.script.said[-1])

    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    await owed(caller)
    reason = "hangup" if end is EndFrame else "dropped"
    assert settled.sent == [("channel_opened", None), ("presented", "cut"), ("channel_closed", reason)]


@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_confirmation_heard_to_its_end_is_not_repeated(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind, chunk_ms: int | None
) -> None:
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until("Done:")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")

    await heard_in_full(caller, c.script.said[-1])


async def test_a_barge_in_during_the_confirmation_cuts_it(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until("Done:", heard_ms=300)
        await c.worker.queue_frame(InterruptionFrame())  # the output drops the rest
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    assert c.bot.speaker.heard_of("Done:") < _length(c.script.said[-1])
    await owed(caller)
    assert ("interrupted", None) in settled.sent


async def test_a_barge_in_during_a_holding_line_cuts_the_confirmation_queued_behind_it(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, holding=HOLDING)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until(HOLDING, heard_ms=100)
        await said(c.script, 1)  # the confirmation is generated, queued behind the holding line
        await c.worker.queue_frame(InterruptionFrame())
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    assert c.bot.speaker.heard_of("Done:") == 0
    await owed(caller)


async def test_a_holding_line_right_before_the_confirmation_presents_nothing(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, holding=HOLDING)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until(HOLDING)  # heard to its end: the bot stops speaking after it
        await c.bot.speaker.until("Done:", heard_ms=300)  # and the caller hangs up here
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


async def test_a_barge_in_before_the_outcome_does_not_cut_the_confirmation_that_follows(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """The filler said with the tool call is cut while the refund is still at the service; the
    confirmation generated afterwards plays to its end: heard, not repeated."""
    caller = Caller(settled, refund_kind)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks, wait=False)
        await c.bot.speaker.until(FILLER, heard_ms=100)
        await truth.wait_in_flight(caller.op)
        await c.worker.queue_frame(InterruptionFrame())
        await truth.release(hold)
        await c.bot.speaker.until("Done:")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    assert c.bot.speaker.heard_of(FILLER) < _length(FILLER)
    await heard_in_full(caller, sent=HEARD_AFTER_A_BARGE_IN)


@dataclass
class Call:
    worker: PipelineWorker
    llm: ScriptedLLM
    bridge: SettledPipecat
    bot: Bot
    script: RefundScript


@asynccontextmanager
async def call(caller: Caller, *, end: type[Frame] = EndFrame) -> AsyncIterator[Call]:
    """A pipeline whose audio plays to the caller at real-time speed; leaving the block is the
    caller hanging up: the line goes dead, then `end` (EndFrame, as the example does, or
    CancelFrame) is queued, wherever the audio is."""
    script = RefundScript(refund=caller.params, again=caller.again)
    llm = ScriptedLLM(script, call_prefix=new_id("call"), filler=FILLER, holding=caller.holding)
    bridge = SettledPipecat(
        caller.settled, caller.conversation, [caller.kind], wait_s=caller.wait_s, authorize_on_call=True
    )
    bridge.register(llm)
    tts = ScriptedTTS(ms_per_char=MS_PER_CHAR, chunk_ms=caller.chunk_ms)
    bot = build(llm, bridge, tools=bridge.tools_schema(), tts=tts)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(bot.worker)
    task = asyncio.create_task(runner.run())
    try:
        bridge.settled.opened()
        yield Call(bot.worker, llm, bridge, bot, script)
        bot.speaker.hang_up()
        await bot.worker.queue_frame(end())
        await asyncio.wait_for(task, 20)
    finally:
        task.cancel()
        await bridge.aclose()


def _length(text: str) -> float:
    return len(text) * MS_PER_CHAR


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


async def test_asked_again_with_5_0_for_5_the_model_meets_the_same_refund(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = written_otherwise(settled, refund_kind)
    async with call(caller) as c:
        await say(c.worker, c.llm, caller.asks)
        await say(c.worker, c.llm, "Please try again.")
    await met_once(caller, truth)
