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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "agents", reason="the OpenAI Agents SDK is not installed: pip install 'settled[openai-agents]'"
)

from agents import FunctionTool, function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner, RealtimeSession
from agents.realtime.model import RealtimeModelConfig
from agents.realtime.openai_realtime import OpenAIRealtimeWebSocketModel
from agents.tool_context import ToolContext
from settled.adapters.common import ActionKind, derived_operation_id
from settled.adapters.openai_agents import HeardPlayback, SettledRealtime

from examples import openai_agents_refund
from examples.openai_agents_refund import ScriptedRealtimeModel, Speaker, say_and_wait
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
from tests.adapters.realtime_server import ScriptedRealtimeServer
from tests.client.support import NOT_YET, AsyncSandbox, RecordingClient, eventually, new_id, refund

# Each line the model says lasts this long, played to the caller in real time.
SPEECH_MS = 900


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


@dataclass
class Call:
    session: RealtimeSession
    model: ScriptedRealtimeModel
    bridge: SettledRealtime
    speaker: Speaker
    script: RefundScript


@asynccontextmanager
async def call(caller: Caller, *, async_tool_calls: bool = True) -> AsyncIterator[Call]:
    """A realtime session whose audio plays to the caller at real-time speed; leaving the block is
    the caller hanging up (the session is closed), wherever the audio is."""
    script = RefundScript(refund=caller.params, again=caller.again)
    model = ScriptedRealtimeModel(
        script,
        call_prefix=new_id("call"),
        speech_ms=SPEECH_MS,
        chunk_ms=caller.chunk_ms,
        holding=caller.holding,
    )
    bridge = _bridge(caller)
    speaker = Speaker(bridge.playback)
    runner = RealtimeRunner(
        RealtimeAgent(name="refunds", tools=bridge.tools()),
        model=model,
        config={"async_tool_calls": async_tool_calls},
    )
    session = await runner.run(model_config={"playback_tracker": bridge.playback})
    playing = asyncio.create_task(speaker.play())
    try:
        async with session:
            watching = asyncio.create_task(_play(bridge, session, speaker))
            yield Call(session, model, bridge, speaker, script)
        await asyncio.wait_for(watching, 20)
    finally:
        playing.cancel()
        await bridge.aclose()


def _bridge(caller: Caller) -> SettledRealtime:
    return SettledRealtime(
        caller.settled, caller.conversation, [caller.kind], wait_s=caller.wait_s, authorize_on_call=True
    )


async def _play(bridge: SettledRealtime, session: RealtimeSession, speaker: Speaker) -> None:
    async for event in bridge.watch(session):
        speaker.take(event)


@pytest.mark.parametrize("async_tool_calls", [True, False], ids=["async-tools", "inline-tools"])
@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient,
    truth: AsyncSandbox,
    refund_kind: ActionKind,
    async_tool_calls: bool,
    chunk_ms: int | None,
) -> None:
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller, async_tool_calls=async_tool_calls) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:", heard_ms=SPEECH_MS / 3)
        # audio_end came long ago (generation is not playback): the caller hangs up a third in.
    assert c.speaker.heard_of("Done:") < SPEECH_MS

    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_confirmation_heard_to_its_end_is_not_repeated(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind, chunk_ms: int | None
) -> None:
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:")  # played to its end, then the caller hangs up
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")

    await heard_in_full(caller, c.script.said[-1])


async def test_a_barge_in_during_the_confirmation_cuts_it(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:", heard_ms=SPEECH_MS / 3)
        await c.model.barge_in()  # the output drops the rest; the caller then hangs up
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    assert c.speaker.heard_of("Done:") < SPEECH_MS
    await owed(caller)
    assert ("interrupted", None) in settled.sent


async def test_a_barge_in_during_a_holding_line_cuts_the_confirmation_queued_behind_it(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, holding=HOLDING)
    async with call(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until(HOLDING, heard_ms=SPEECH_MS / 3)
        assert c.speaker.item_saying("Done:") is not None  # generated, queued, not played
        await c.model.barge_in()
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    assert c.speaker.heard_of("Done:") == 0
    await owed(caller)


async def test_a_hang_up_after_a_holding_line_mid_confirmation_leaves_it_owed(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, holding=HOLDING)
    async with call(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until(HOLDING)  # heard to its end: it presents nothing
        await c.speaker.until("Done:", heard_ms=SPEECH_MS / 3)
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


async def test_a_barge_in_before_the_outcome_does_not_cut_the_confirmation_that_follows(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """The filler said with the tool call is cut while the refund is still at the service; the
    confirmation generated afterwards plays to its end: heard, not repeated."""
    caller = Caller(settled, refund_kind)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with call(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until(FILLER, heard_ms=SPEECH_MS / 3)
        await truth.wait_in_flight(caller.op)
        await c.model.barge_in()
        await truth.release(hold)
        await c.speaker.until("Done:")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    assert c.speaker.heard_of(FILLER) < SPEECH_MS
    await heard_in_full(caller, sent=HEARD_AFTER_A_BARGE_IN)


async def test_with_settled_the_claim_is_true_and_there_is_one_refund(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, wait_s=0.2)
    hang = await truth.fault("refunds", "create", "hang", caller.op, apply=True)
    async with call(caller) as c:
        script, model = c.script, c.model
        model.replied.clear()
        await c.session.send_message(caller.asks)
        await truth.wait_in_flight(caller.op)
        await asyncio.wait_for(model.replied.wait(), 20)  # the tool answered after its short wait
        assert script.said[-1] in NOT_YET
        await c.speaker.until(script.said[-1], heard_ms=SPEECH_MS / 3)
        await model.barge_in()  # cuts that sentence off
        await truth.release(hang)  # applied, and the answer is lost
        await eventually(lambda: _state_is(settled, caller.op, State.CONFIRMED), what="the refund confirmed")
        await say_and_wait(c.session, model, "Please try again.")
        await say_and_wait(c.session, model, "Did you do it?")
        await c.speaker.until(script.said[-1])  # the caller hears the answer, then hangs up
        await eventually(lambda: recorded_heard(caller), what="the answer recorded as heard")

    records = await truth.refunds_for(caller.params["order_id"])
    action = await settled.get(caller.op)
    assert len(records) == 1 and records[0]["key"] == caller.op
    assert action.state is State.CONFIRMED and action.business_ref == records[0]["id"]
    assert f"Your reference is {records[0]['id']}." in script.said[1]  # the retry met the same action
    assert "CONFIRMED" in script.said[2] and records[0]["id"] in script.said[2]
    assert "unknown" in [entry.state for entry in action.history]  # the lost answer was checked
    assert settled.events == [("channel_opened", None), ("interrupted", None), ("channel_closed", "hangup")]
    assert action.presented is not None and action.presented.completed
    assert action.presented.state is State.CONFIRMED and records[0]["id"] in action.presented.text

    handoff = await settled.handoff(caller.conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "hangup"
    assert handoff.work == "stopped" and handoff.say == ""  # heard to the end: nothing owed


@dataclass
class WebSocketCall:
    session: RealtimeSession
    server: ScriptedRealtimeServer
    speaker: Speaker


@asynccontextmanager
async def call_over_websocket(caller: Caller) -> AsyncIterator[WebSocketCall]:
    """The same call through the SDK's own WebSocket model, against a scripted Realtime server
    that streams the audio faster than real time; leaving the block is the caller hanging up."""
    server = ScriptedRealtimeServer(
        RefundScript(refund=caller.params, again=caller.again), speech_ms=SPEECH_MS
    )
    bridge = _bridge(caller)
    speaker = Speaker(bridge.playback)
    model = OpenAIRealtimeWebSocketModel()
    runner = RealtimeRunner(RealtimeAgent(name="refunds", tools=bridge.tools()), model=model)
    async with server.running():
        config: RealtimeModelConfig = {
            "url": server.url,
            "api_key": "sk-scripted",
            "playback_tracker": bridge.playback,
        }
        session = await runner.run(model_config=config)
        playing = asyncio.create_task(speaker.play())
        try:
            async with session:
                watching = asyncio.create_task(_play(bridge, session, speaker))
                yield WebSocketCall(session, server, speaker)
            await asyncio.wait_for(watching, 20)
        finally:
            playing.cancel()
            await bridge.aclose()


async def test_over_the_websocket_model_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call_over_websocket(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:", heard_ms=SPEECH_MS / 3)
    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


async def test_over_the_websocket_model_the_service_s_barge_in_cuts_the_confirmation(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call_over_websocket(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:", heard_ms=SPEECH_MS / 3)
        await c.server.barge_in()  # speech_started: the SDK reports audio_interrupted
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    await owed(caller)
    assert ("interrupted", None) in settled.sent


async def test_over_the_websocket_model_a_confirmation_heard_to_its_end_is_not_repeated(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call_over_websocket(caller) as c:
        await c.session.send_message(caller.asks)
        await c.speaker.until("Done:")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    await heard_in_full(caller)


@pytest.mark.parametrize(("audio_format", "bytes_per_s"), [("pcm16", 48_000), ("g711_ulaw", 8_000)])
def test_generated_and_played_audio_are_measured_alike_in_the_session_s_format(
    audio_format: str, bytes_per_s: int
) -> None:
    """What was generated (`ms_of`) and what played (`on_play_bytes`) are counted alike, by the
    session's format: a second of G.711 is neither a sixth of a second (heard too early) nor six."""
    played: list[tuple[str, float]] = []
    playback = HeardPlayback(lambda item, ms: played.append((item, ms)))
    playback.set_audio_format(audio_format)
    assert playback.ms_of(bytes(bytes_per_s)) == pytest.approx(1000)
    playback.on_play_bytes("item_1", 0, bytes(bytes_per_s // 2))
    assert played == [("item_1", pytest.approx(500))]


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


async def _state_is(settled: SentClient, op: str, state: State) -> bool:
    return (await settled.get(op)).state is state


async def test_the_example_runs_against_the_stack(stack: Stack, truth: AsyncSandbox) -> None:
    conversation, order = new_id("conv"), new_id("order")
    result = await openai_agents_refund.call(stack.api_url, conversation, order)
    records = await truth.refunds_for(order)
    assert len(records) == 1 and all(records[0]["id"] in line for line in result["said"])
    assert result["handoff"].channels.voice == "closed" and result["handoff"].work == "stopped"


async def test_asked_again_with_5_0_for_5_the_model_meets_the_same_refund(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = written_otherwise(settled, refund_kind)
    async with call(caller) as c:
        await say_and_wait(c.session, c.model, caller.asks)
        await say_and_wait(c.session, c.model, "Please try again.")
    await met_once(caller, truth)
