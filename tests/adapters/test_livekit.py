"""LiveKit Agents, driven for real: an `AgentSession` with a scripted LLM (LiveKit's `llm.LLM`
interface), run text-only through `session.run`, its tools invoked by LiveKit's own function-tool
path with a `RunContext`. Offline: no LiveKit server, no room.

The failure: a refund request is at the service when the caller cuts in. LiveKit keeps the tool
running through the interruption, but the service's answer is lost (sandbox fault `hang`, applied,
then the connection drops). The naive tool raises, the model tells the caller it failed, the caller
says "try again", and the order is refunded twice. With settled the tool meets the lost answer with
a lookup, the model says what is verified, the retry meets the same durable action: one refund.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "livekit.agents", reason="LiveKit Agents is not installed: pip install 'settled[livekit]'"
)

from livekit.agents import Agent, AgentSession, CloseReason, RunContext, function_tool
from settled.adapters.common import ActionKind, derived_operation_id
from settled.adapters.livekit import SettledLiveKit

from examples import livekit_refund
from examples.livekit_refund import Loudspeaker, ScriptedLLM, ScriptedTTS
from examples.scripted import FILLER, HOLDING, RefundScript
from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.adapters.conftest import SentClient
from tests.adapters.heard import (
    Caller,
    heard_in_full,
    met_once,
    owed,
    recorded_heard,
    sent,
    written_otherwise,
)
from tests.client.support import AsyncSandbox, RecordingClient, eventually, new_id, refund

# How long the TTS speaks per character, played in real time: the confirmation lasts about 1 s.
MS_PER_CHAR = 12.0

CHECKING = "The request to refund the order was sent, but I haven't confirmed the result."


async def _tool_answered(session: AgentSession[Any], call_id: str) -> bool:
    return any(
        item.type == "function_call_output" and item.call_id.startswith(call_id)
        for item in session.history.items
    )


async def _interrupted_mid_flight(
    session: AgentSession[Any], truth: AsyncSandbox, key: str, text: str
) -> list[Any]:
    """The caller asks; while the request is at the service, the caller cuts in. LiveKit's
    interruption waits for the running tool, so it is awaited with the run, later."""
    run = session.run(user_input=text)
    await truth.wait_in_flight(key)
    return [run, session.interrupt()]


async def _settle(pending: list[Any]) -> None:
    for awaitable in pending:
        with suppress(Exception):  # an interrupted run may end in an error of its own
            await asyncio.wait_for(asyncio.shield(awaitable), 20)


async def test_naive_tool_fails_loudly_and_the_retry_refunds_twice(stack: Stack, truth: AsyncSandbox) -> None:
    params, prefix = refund(), new_id("call")
    script = RefundScript(refund=params)

    @function_tool
    async def refund_tool(context: RunContext, order_id: str, amount: float, currency: str) -> str:
        """Refund the order."""
        body = {"order_id": order_id, "amount": amount, "currency": currency}
        async with httpx.AsyncClient(base_url=stack.sandbox_url, timeout=10) as http:
            answer = await http.post(
                "/refunds", json={**body, "client_reference": context.function_call.call_id}
            )
        answer.raise_for_status()
        return f"Tell the caller: Your refund has been submitted, {answer.json()['id']}."

    refund_tool._info.name = "refund"  # the same tool name the model calls
    hang = await truth.fault("refunds", "create", "hang", f"{prefix}_1", apply=True)
    session: AgentSession[None] = AgentSession(llm=ScriptedLLM(script, call_prefix=prefix))
    await session.start(Agent(instructions="refunds", tools=[refund_tool]))
    pending = await _interrupted_mid_flight(
        session, truth, f"{prefix}_1", f"Please refund order {params['order_id']}."
    )
    await truth.release(hang)  # applied, and the answer is lost: the tool raises
    await eventually(lambda: _tool_answered(session, f"{prefix}_1"), what="the tool's output")
    await _settle(pending)
    await session.run(user_input="Sorry, go on.")
    await session.run(user_input="Please try again.")
    await session.aclose()

    assert "error" in script.said[0].lower()  # what LiveKit told the model of the raised tool
    assert script.said[1].startswith("Your refund has been submitted")
    assert len(await truth.refunds_for(params["order_id"])) == 2  # refunded twice


async def test_with_settled_the_claim_is_true_and_there_is_one_refund(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params, prefix = new_id("conv"), refund(), new_id("call")
    op = derived_operation_id(conversation, "refund", params)
    script = RefundScript(refund=params)
    bridge = SettledLiveKit(settled, conversation, [refund_kind], wait_s=5, authorize_on_call=True)
    hang = await truth.fault("refunds", "create", "hang", op, apply=True)
    # The lookup the send's own call makes at once cannot tell (503): the tool answers "not confirmed
    # yet" and follows the action until a later lookup confirms it.
    await truth.fault("refunds", "lookup", "fail_before_apply", op, status=503)
    session: AgentSession[None] = AgentSession(llm=ScriptedLLM(script, call_prefix=prefix))
    bridge.attach(session)
    await session.start(Agent(instructions="refunds", tools=bridge.tools()))
    pending = await _interrupted_mid_flight(session, truth, op, f"Please refund order {params['order_id']}.")
    await truth.release(hang)  # applied, and the answer is lost
    await eventually(lambda: _said_done(script), what="the outcome, followed after the update")
    await _settle(pending)
    await session.run(user_input="Please try again.")
    await session.run(user_input="Did you do it?")
    await session.aclose()
    await bridge.aclose()

    records = await truth.refunds_for(params["order_id"])
    action = await settled.get(op)
    ref = records[0]["id"]
    assert len(records) == 1 and records[0]["key"] == op
    assert action.state is State.CONFIRMED and action.business_ref == ref
    # Whether the model heard "sent, not confirmed yet, being checked" before the lookup answered
    # depends on timing; either way every line it said is verified state, and it ends with the truth.
    for line in script.said:
        assert line == action.say or line.startswith(CHECKING) or ("CONFIRMED" in line and ref in line), line
    assert script.said.count(action.say) >= 2 and ref in action.say
    assert "CONFIRMED" in script.said[-1] and ref in script.said[-1]
    assert "unknown" in [entry.state for entry in action.history]  # the lost answer was looked up
    assert ("interrupted", None) in settled.events and settled.events[-1] == (
        "channel_closed",
        "ended_by_agent",
    )
    assert action.presented is not None and action.presented.completed
    assert action.presented.state is State.CONFIRMED

    handoff = await settled.handoff(conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "ended_by_agent"
    assert handoff.work == "stopped" and handoff.say == ""


async def test_an_answer_still_pending_is_reported_then_followed_to_the_outcome(
    settled: RecordingClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    op = derived_operation_id(conversation, "refund", params)
    script = RefundScript(refund=params)
    bridge = SettledLiveKit(settled, conversation, [refund_kind], wait_s=0.3, authorize_on_call=True)
    hold = await truth.fault("refunds", "create", "hold", op, apply=True)
    session: AgentSession[None] = AgentSession(llm=ScriptedLLM(script))
    bridge.attach(session)
    await session.start(Agent(instructions="refunds", tools=bridge.tools()))
    await session.run(user_input=f"Please refund order {params['order_id']}.")
    assert script.said == ["I'm sending the request to refund the order now; it isn't confirmed yet."]
    await truth.release(hold)
    await eventually(lambda: _said(script, 2), what="the deferred outcome")
    await session.aclose()
    await bridge.aclose()
    ref = (await truth.refunds_for(params["order_id"]))[0]["id"]
    assert ref in script.said[1] and (await settled.get(op)).state is State.CONFIRMED


@dataclass
class Call:
    session: AgentSession[None]
    speaker: Loudspeaker
    script: RefundScript


@asynccontextmanager
async def call(caller: Caller, *, disconnect: bool = False) -> AsyncIterator[Call]:
    """An `AgentSession` whose audio plays to the caller at real-time speed; the model says a filler
    with the tool call. Leaving the block is the caller hanging up, wherever the audio is: the line
    goes dead, then the session closes (`disconnect`: as room io closes it when the participant
    disconnects; else `aclose()`)."""
    script = RefundScript(refund=caller.params, again=caller.again)
    voice = ScriptedTTS(ms_per_char=MS_PER_CHAR, chunk_ms=caller.chunk_ms)
    session: AgentSession[None] = AgentSession(
        llm=ScriptedLLM(script, call_prefix=new_id("call"), filler=FILLER, holding=caller.holding), tts=voice
    )
    speaker = Loudspeaker(voice.sentences)
    session.output.audio = speaker
    bridge = SettledLiveKit(
        caller.settled, caller.conversation, [caller.kind], wait_s=caller.wait_s, authorize_on_call=True
    )
    bridge.attach(session)
    closed = asyncio.Event()
    session.on("close", lambda _: closed.set())
    await session.start(Agent(instructions="refunds", tools=bridge.tools()))
    try:
        yield Call(session, speaker, script)
        speaker.hang_up()
        if disconnect:
            session._close_soon(reason=CloseReason.PARTICIPANT_DISCONNECTED)  # what room io does
        else:
            await session.aclose()
        await asyncio.wait_for(closed.wait(), 20)
    finally:
        await session.aclose()
        await speaker.aclose()
        await bridge.aclose()


@pytest.mark.parametrize("disconnect", [True, False], ids=["participant-disconnect", "session-close"])
@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind, disconnect: bool, chunk_ms: int | None
) -> None:
    """The filler said with the tool call finishes playing after the tool returned: it presents
    nothing. The confirmation is cut by the hang-up: owed."""
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller, disconnect=disconnect) as c:
        c.session.generate_reply(user_input=caller.asks)
        await c.speaker.until(FILLER)
        await c.speaker.until("Your reference", heard_ms=150)  # the hang-up, mid-confirmation
    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    await owed(caller, verbatim=False)
    reason = "hangup" if disconnect else "ended_by_agent"
    # Closing interrupts the speech (LiveKit also reports that as an interruption), then closes.
    assert [entry for entry in settled.sent if entry[0] == "presented"] == [("presented", "cut")]
    assert settled.sent[-1] == ("channel_closed", reason)


@pytest.mark.parametrize("chunk_ms", [20, None], ids=["streamed", "one-frame"])
async def test_a_confirmation_heard_to_its_end_is_not_repeated(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind, chunk_ms: int | None
) -> None:
    caller = Caller(settled, refund_kind, chunk_ms=chunk_ms)
    async with call(caller, disconnect=True) as c:
        c.session.generate_reply(user_input=caller.asks)
        await c.speaker.until("Your reference")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    await heard_in_full(caller)


async def test_a_barge_in_during_the_confirmation_cuts_it(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller) as c:
        c.session.generate_reply(user_input=caller.asks)
        await c.speaker.until("Your reference", heard_ms=150)
        await c.session.interrupt()
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    await owed(caller, verbatim=False)
    assert ("interrupted", None) in settled.sent


async def test_a_barge_in_before_the_outcome_does_not_cut_the_confirmation_that_follows(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """The caller cuts the filler off while the refund is at the service; LiveKit keeps the tool
    running, and the outcome it reports later plays to its end: heard, not repeated. What the
    model says in between ("not confirmed yet") presents only that."""
    caller = Caller(settled, refund_kind, wait_s=0.3)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with call(caller) as c:
        c.session.generate_reply(user_input=caller.asks)
        await c.speaker.until(FILLER, heard_ms=100)
        await truth.wait_in_flight(caller.op)
        await c.session.interrupt()
        await truth.release(hold)
        await c.speaker.until("Your reference")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    await heard_in_full(caller, sent=None)


async def test_a_holding_line_after_a_barge_in_presents_nothing(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """The caller cuts the confirmation off ("are you still there?") and hears "I'm still working
    on that" to its end, generated after the model had the outcome. It does not say the outcome:
    the cut confirmation is what was presented, and it is owed."""
    caller = Caller(settled, refund_kind, holding=HOLDING)
    async with call(caller) as c:
        c.session.generate_reply(user_input=caller.asks)
        await c.speaker.until("Done:", heard_ms=150)
        await c.session.interrupt()  # the caller cuts in ...
        c.session.generate_reply(user_input="Are you still there?")  # ... and is answered
        await c.speaker.until(HOLDING)
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the cut recorded")
    assert c.speaker.heard_of(HOLDING) >= len(HOLDING) * MS_PER_CHAR * 0.9
    await owed(caller, verbatim=False)
    assert ("presented", "heard") not in settled.sent


async def _confirmed_in(session: AgentSession[None]) -> bool:
    return any(
        item.type == "function_call_output" and item.output.startswith("CONFIRMED")
        for item in session.history.items
    )


async def _said_done(script: RefundScript) -> bool:
    return any(line.startswith("Done:") for line in script.said)


async def _said(script: RefundScript, count: int) -> bool:
    return len(script.said) >= count


async def test_the_example_runs_against_the_stack(stack: Stack, truth: AsyncSandbox) -> None:
    conversation, order = new_id("conv"), new_id("order")
    result = await livekit_refund.call(stack.api_url, conversation, order)
    records = await truth.refunds_for(order)
    assert len(records) == 1 and all(records[0]["id"] in line for line in result["said"])
    assert result["handoff"].channels.voice == "closed" and result["handoff"].work == "stopped"


async def test_asked_again_with_5_0_for_5_the_model_meets_the_same_refund(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = written_otherwise(settled, refund_kind)
    async with call(caller) as c:
        await c.session.run(user_input=caller.asks)
        await c.session.run(user_input="Please try again.")
    await met_once(caller, truth)
