"""Google's ADK in a live run, driven for real through its own live model interfaces (a scripted
Gemini Live connection, tests/adapters/gemini_live.py), offline, against the real stack, judged by
the sandbox's records.

The founding failure: on Gemini Live a caller says "stop" while the refund is at the service; the
model, knowing nothing of it, says "I've cancelled the refund", and the refund goes through. With
settled the model has only verified state to speak from: its next words say the refund is not
confirmed yet, then that it went through, and the service holds exactly that one refund.
"""

import ast
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="Google's ADK is not installed: pip install 'settled[google-adk]'")

from google.adk.agents import Agent, LiveRequestQueue, RunConfig
from google.adk.runners import InMemoryRunner
from google.genai import types
from settled.adapters.common import ActionKind, load_action_kinds
from settled.adapters.google_adk import SettledLive
from settled.adapters.tools import AUTHORIZE_TOOL

from examples.scripted import FILLER, VERIFY_TOOL, RefundScript, ToolCall
from settled.client import SettledAPIError
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.adapters.conftest import SentClient
from tests.adapters.gemini_live import ScriptedGemini, ScriptedLive, Speaker
from tests.adapters.heard import (
    CUT_AFTER_A_BARGE_IN,
    CUT_BY_THE_HANG_UP,
    HEARD_THEN_HUNG_UP,
    Caller,
    heard_in_full,
    not_heard,
    owed,
    recorded_heard,
    sent,
)
from tests.client.support import AsyncSandbox, eventually, new_id

MS_PER_CHAR = 12.0


class StopScript(RefundScript):
    """The refund script, and a caller who says "stop": the model asks settled what is true."""

    def decide(self, user_text: str) -> ToolCall | None:
        if "stop" in user_text.lower():
            return ToolCall(VERIFY_TOOL, {})
        return super().decide(user_text)


@dataclass
class Call:
    queue: LiveRequestQueue
    model: ScriptedLive
    bridge: SettledLive
    speaker: Speaker
    script: RefundScript

    def says(self, text: str) -> None:
        self.queue.send_content(types.Content(role="user", parts=[types.Part(text=text)]))


@asynccontextmanager
async def call(
    caller: Caller,
    *,
    non_blocking: bool = False,
    scheduling: types.FunctionResponseScheduling = types.FunctionResponseScheduling.WHEN_IDLE,
    transcription_late_s: float = 0.0,
    split: bool = False,
) -> AsyncIterator[Call]:
    """A live ADK run whose audio plays to the caller in real time; leaving the block is the caller
    hanging up (the line goes dead, the app closes the request queue), wherever the audio is.
    `transcription_late_s`, `split`: how late the model's output transcription comes (ScriptedLive)."""
    script = StopScript(refund=caller.params)
    model = ScriptedLive(
        script,
        call_prefix=new_id("call"),
        ms_per_char=MS_PER_CHAR,
        filler=FILLER if non_blocking else None,
        transcription_late_s=transcription_late_s,
        split=split,
    )
    bridge = SettledLive(
        caller.settled,
        caller.conversation,
        [caller.kind],
        wait_s=caller.wait_s,
        authorize_on_call=True,
        non_blocking=non_blocking,
        scheduling=scheduling,
    )
    agent = Agent(
        name="refunds",
        model=ScriptedGemini(model="gemini-live-scripted", connection=model),
        instruction="refunds",
        tools=bridge.tools(),
    )
    runner = InMemoryRunner(agent=agent)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="caller")
    queue = LiveRequestQueue()
    speaker = Speaker(bridge, model.lines, MS_PER_CHAR)
    events = runner.run_live(
        user_id="caller",
        session_id=session.id,
        live_request_queue=queue,
        run_config=RunConfig(response_modalities=["AUDIO"]),
    )

    async def app() -> None:
        async for event in bridge.watch(events):
            speaker.handle(event)

    running = asyncio.create_task(app())
    try:
        yield Call(queue, model, bridge, speaker, script)
        speaker.hang_up()
        queue.close()
        await asyncio.wait_for(running, 20)
    finally:
        running.cancel()
        await speaker.aclose()
        await bridge.aclose()
        await runner.close()


async def test_a_stop_while_the_refund_is_in_flight_is_answered_truly(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind, wait_s=0.3)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with call(caller, non_blocking=True) as c:
        c.says(caller.asks)
        await c.speaker.until(FILLER, heard_ms=100)
        c.says("Stop! Stop that.")  # cuts the filler off, the refund held at the service
        await truth.wait_in_flight(caller.op)
        await c.speaker.until(caller.op)  # the verified answer to "stop"
        await truth.release(hold)
        await c.speaker.until("Your reference")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")

    records = await truth.refunds_for(caller.params["order_id"])
    action = await settled.get(caller.op)
    assert len(records) == 1 and action.state is State.CONFIRMED and action.business_ref == records[0]["id"]
    said = c.script.said
    assert not any("cancel" in line.lower() for line in said), said
    _never_done_before_confirmed(c.model, action)
    assert said[-1] == action.say  # the agent's last words are the record's
    assert ("interrupted", None) in settled.sent
    await heard_in_full(caller, sent=None)


async def test_a_lost_answer_is_looked_up_never_sent_twice_and_said_when_verified(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """The service applies the refund and the answer is lost, and the lookup the send's own call makes
    at once gets no answer: the model says it is being checked, the caller's "try again" meets the same
    action, and "did you do it?" answers from the next lookup."""
    caller = Caller(settled, refund_kind)
    await truth.fault("refunds", "create", "drop_after_apply", caller.op)
    await truth.fault("refunds", "lookup", "fail_before_apply", caller.op, status=503)  # that one alone
    async with call(caller) as c:
        c.says(caller.asks)
        await c.speaker.until("haven't confirmed")
        c.says("Please try again.")
        await eventually(lambda: _said(c.model, 2), what="the answer to the retry")
        await settled.await_settled(caller.op, 20)
        c.says("Did you do it?")
        await c.speaker.until("CONFIRMED")
    records = await truth.refunds_for(caller.params["order_id"])
    action = await settled.get(caller.op)
    assert len(records) == 1 and records[0]["key"] == caller.op
    assert action.state is State.CONFIRMED and "unknown" in [entry.state for entry in action.history]
    # The "haven't confirmed" line was awaited above; on a busy machine the lookup may confirm before
    # the model has finished saying it, so it need not come before the confirmation's time.
    _never_done_before_confirmed(c.model, action, spoke_in_flight=False)
    assert "CONFIRMED" in c.model.lines[-1] and action.business_ref in c.model.lines[-1]


async def test_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller) as c:
        c.says(caller.asks)
        await c.speaker.until("Your reference", heard_ms=150)
    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


async def test_a_confirmation_heard_to_its_end_is_not_repeated(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller) as c:
        c.says(caller.asks)
        await c.speaker.until("Your reference")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    await heard_in_full(caller, said_last=c.script.said[-1], sent=HEARD_THEN_HUNG_UP)


@pytest.mark.parametrize("run", range(5))
async def test_a_confirmation_cut_before_its_late_transcription_came_stays_cut(
    settled: SentClient, refund_kind: ActionKind, run: int
) -> None:
    """The caller cuts in 150 ms into the confirmation; its transcription comes 0.3 s late, after the
    model's next line began, and that line plays to its end: the confirmation is recorded cut, never
    heard through the next line's playback, and it stays owed."""
    caller = Caller(settled, refund_kind)
    async with call(caller, transcription_late_s=0.3) as c:
        c.says(caller.asks)
        await c.speaker.until("Your reference", heard_ms=150)
        c.says("Wait, what?")  # cuts the confirmation; the model answers with its next line
        await c.speaker.until("anything else")  # the next line, played to its end
        await eventually(lambda: sent(settled, ("presented", "cut")), what="the late transcription bound")
    await owed(caller, sent=CUT_AFTER_A_BARGE_IN)


@pytest.mark.parametrize("run", range(3))
@pytest.mark.parametrize(
    ("late_s", "split"), [(0.3, False), (2.5, False), (0.3, True)], ids=["late", "after-playback", "split"]
)
async def test_a_confirmation_heard_to_its_end_is_heard_however_late_its_transcription(
    settled: SentClient, refund_kind: ActionKind, late_s: float, split: bool, run: int
) -> None:
    """The confirmation plays to its end; its transcription comes late (during its playback, after
    it, or half of it late with ADK's second `finished` piece at the turn's end): recorded heard, with
    its whole sentence, and not repeated."""
    caller = Caller(settled, refund_kind)
    async with call(caller, transcription_late_s=late_s, split=split) as c:
        c.says(caller.asks)
        await c.speaker.until("Your reference")
        await eventually(lambda: recorded_heard(caller), what="the confirmation recorded as heard")
    await heard_in_full(caller, said_last=c.script.said[-1], sent=HEARD_THEN_HUNG_UP)


@pytest.mark.parametrize("run", range(3))
async def test_a_hang_up_mid_confirmation_with_its_transcription_late_leaves_it_owed(
    settled: SentClient, refund_kind: ActionKind, run: int
) -> None:
    caller = Caller(settled, refund_kind)
    async with call(caller, transcription_late_s=0.3) as c:
        c.says(caller.asks)
        await c.speaker.until("Your reference", heard_ms=150)
    await not_heard(caller)


@pytest.mark.parametrize(
    "scheduling",
    [types.FunctionResponseScheduling.WHEN_IDLE, types.FunctionResponseScheduling.SILENT],
    ids=["when-idle", "silent"],
)
async def test_a_non_blocking_refund_is_never_announced_before_it_is_confirmed(
    settled: SentClient,
    truth: AsyncSandbox,
    refund_kind: ActionKind,
    scheduling: types.FunctionResponseScheduling,
) -> None:
    """The model talks on while the refund is held at the service; asked, it says what is verified.
    The outcome reaches it only once confirmed: said when idle, or, silently, owed to the next channel."""
    caller = Caller(settled, refund_kind, wait_s=0.3)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with call(caller, non_blocking=True, scheduling=scheduling) as c:
        c.says(caller.asks)
        await truth.wait_in_flight(caller.op)
        await c.speaker.until(FILLER)
        c.says("Did you do it?")
        await c.speaker.until(caller.op)  # not confirmed yet: the verified answer
        await truth.release(hold)
        action = await settled.await_settled(caller.op, 20)
        if scheduling is types.FunctionResponseScheduling.WHEN_IDLE:
            await c.speaker.until("Your reference")
        else:
            await eventually(lambda: _noted(c.model), what="the outcome noted silently")
    action = await settled.get(caller.op)
    assert action.state is State.CONFIRMED and len(await truth.refunds_for(caller.params["order_id"])) == 1
    _never_done_before_confirmed(c.model, action)
    if scheduling is types.FunctionResponseScheduling.WHEN_IDLE:
        assert c.script.said[-1] == action.say
        await heard_in_full(caller, sent=None)
    else:
        assert not any(action.business_ref in line for line in c.script.said)
        assert "CONFIRMED" in c.model.noted[-1]
        assert (await settled.handoff(caller.conversation)).say == action.say  # owed


def _never_done_before_confirmed(
    model: ScriptedLive, action: ActionStatus, spoke_in_flight: bool = True
) -> None:
    """No line the model said before the service confirmed the refund tells of it as done (its
    reference); with `spoke_in_flight`, some line was said while it was in flight."""
    assert action.business_ref is not None
    confirmed_at = next(entry.at for entry in action.history if entry.state is State.CONFIRMED).timestamp()
    before = [line for at, line in model.said_at if at < confirmed_at]
    assert not any(action.business_ref in line for line in before), before
    assert before or not spoke_in_flight, model.said_at


async def _said(model: ScriptedLive, count: int) -> bool:
    return len(model.lines) >= count


async def _noted(model: ScriptedLive) -> bool:
    return bool(model.noted)


@dataclass
class GoAheadScript(RefundScript):
    """The refund script, and a caller whose "yes" is the go-ahead the model passes on."""

    operation_id: str = ""

    def decide(self, user_text: str) -> ToolCall | None:
        if user_text.lower().startswith("yes"):
            return ToolCall(AUTHORIZE_TOOL, {"operation_id": self.operation_id})
        return super().decide(user_text)


def guide_example() -> str:
    """The Python block of docs/gemini-live.md, as a reader copies it."""
    guide = (Path(__file__).parents[2] / "docs" / "gemini-live.md").read_text()
    return guide.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_guides_example_runs_as_written_against_the_real_stack(
    stack: Stack, settled: SentClient, truth: AsyncSandbox
) -> None:
    """docs/gemini-live.md's example, run as written (top-level awaits and all), with the scripted
    Gemini Live connection as its `LIVE_MODEL`: the caller asks, the refund is done once, and with no
    audio output reporting playback the confirmation is never recorded heard: the handoff says it."""
    caller = Caller(settled, load_action_kinds(stack.config, names=["refund"])[0])
    script = GoAheadScript(refund=caller.params, operation_id=caller.op)
    model = ScriptedLive(script, call_prefix=new_id("call"), ms_per_char=MS_PER_CHAR)
    names: dict[str, Any] = {
        "SETTLED_URL": stack.api_url,
        "SETTLED_API_KEY": None,
        "conversation_id": caller.conversation,
        "user_id": "caller",
        "LIVE_MODEL": ScriptedGemini(model="gemini-live-scripted", connection=model),
    }
    code = compile(guide_example(), "docs/gemini-live.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    running = asyncio.ensure_future(eval(code, names))  # the guide's own code
    try:
        await eventually(lambda: _set_up(names, running), what="the example's request queue")
        for turn, words in enumerate((caller.asks, "Yes, go ahead."), start=1):  # it needs a go-ahead
            names["queue"].send_content(types.Content(role="user", parts=[types.Part(text=words)]))
            await eventually(lambda turn=turn: _said(model, turn), what="the model's answer")
        await eventually(lambda: _confirmed(settled, caller.op), timeout_s=30, what="the refund confirmed")
        action = await settled.get(caller.op)
        await eventually(lambda: _said_outcome(model, action), what="the confirmation said")
        names["queue"].close()  # the caller hangs up
        await asyncio.wait_for(running, 20)
    finally:
        running.cancel()
    assert action.state is State.CONFIRMED and len(await truth.refunds_for(caller.params["order_id"])) == 1
    await not_heard(caller)


async def _set_up(names: dict[str, Any], running: asyncio.Future[Any]) -> bool:
    if running.done():
        running.result()  # the example failed: say how
    return "events" in names


async def _confirmed(settled: SentClient, op: str) -> bool:
    try:
        return (await settled.get(op)).state is State.CONFIRMED
    except SettledAPIError as error:
        if error.code == "not_found":
            return False  # the model has not asked yet
        raise


async def _said_outcome(model: ScriptedLive, action: ActionStatus) -> bool:
    return any(action.say in line for line in model.lines)
