"""A refund over a Pipecat pipeline, with settled keeping the truth.

    make dev                              # settled, Temporal and the sandbox services
    python -m examples.pipecat_refund     # a scripted call against them

`ScriptedLLM` stands in for the LLM service and `ScriptedSpeaker` for TTS plus the output
transport, so this runs offline. In a real bot, keep the three settled lines (`register`,
`tools_schema`, `observer`) and put your STT, LLM, TTS and transport back in the pipeline.
"""

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators import async_tool_messages
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings
from pipecat.workers.runner import WorkerRunner

from adapters.common import load_action_kinds
from adapters.pipecat import SettledPipecat
from examples.scripted import RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount before calling the refund tool. "
    "Say only what the tools tell you; never say a refund is done unless a tool says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]


# Every setting of an LLM service is declared; a scripted one has none of them.
_SETTINGS = LLMSettings(
    model="scripted",
    system_instruction=None,
    temperature=None,
    max_tokens=None,
    top_p=None,
    top_k=None,
    frequency_penalty=None,
    presence_penalty=None,
    seed=None,
    filter_incomplete_user_turns=False,
    user_turn_completion_config=None,
)


class ScriptedLLM(LLMService):
    """An LLM service that follows a `RefundScript`: it calls a tool when the caller asks for
    something, and says each tool result it gets (final, intermediate, or CANCELLED)."""

    def __init__(self, script: RefundScript, *, call_prefix: str = "call") -> None:
        super().__init__(settings=_SETTINGS)
        self.script = script
        self.call_ids: list[str] = []
        self.replied = asyncio.Event()
        self._prefix = call_prefix
        self._ids = itertools.count(1)
        self._seen: dict[int, str] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self._respond(frame.context)
        else:
            await self.push_frame(frame, direction)

    async def _respond(self, context: LLMContext) -> None:
        fresh = []
        for index, message in enumerate(context.messages):
            text = json.dumps(message, sort_keys=True, default=str)
            if self._seen.get(index) != text:  # new, or a placeholder updated in place
                fresh.append(message)
                self._seen[index] = text
        users = [m for m in fresh if isinstance(m, dict) and m.get("role") == "user"]
        results = [text for m in fresh if (text := _result_of(m)) is not None]
        if users:
            user_text = str(users[-1].get("content", ""))
            call = self.script.decide(user_text)
            if call is None:
                # Pipecat's async-tool policy: a result that has arrived is owed to the caller.
                line = self.script.reply(results[-1]) if results else self.script.small_talk(user_text)
                await self._say(line)
                return
            call_id = f"{self._prefix}_{next(self._ids)}"
            self.call_ids.append(call_id)
            await self.run_function_calls([FunctionCallFromLLM(call.name, call_id, call.arguments, context)])
            return
        if results:
            await self._say(self.script.reply(results[-1]))

    async def _say(self, text: str) -> None:
        await self.push_frame(LLMFullResponseStartFrame())
        await self.push_frame(LLMTextFrame(text))
        await self.push_frame(LLMFullResponseEndFrame())
        self.replied.set()


def _result_of(message: Any) -> str | None:
    """The text of a tool result in the context, or None for anything else (or "still running")."""
    if not isinstance(message, dict) or message.get("role") not in ("tool", "developer"):
        return None
    payload = async_tool_messages.parse_message(message)
    raw = message.get("content") if payload is None else payload.result
    if raw is None or not isinstance(raw, str) or raw == "IN_PROGRESS":
        return None  # still running: a synchronous call's placeholder
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw  # e.g. the bare CANCELLED that Pipecat writes for a cancelled call
    return value if isinstance(value, str) else json.dumps(value)


class ScriptedSpeaker(FrameProcessor):
    """TTS and the output transport in one: each LLM response is "played" (BotStartedSpeaking,
    TTSText, BotStoppedSpeaking). With `hold` set, the next one keeps playing until `finish()` or
    an interruption, like audio still coming out of the speaker."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.playing = asyncio.Event()
        self._text = ""
        self._done: asyncio.Event | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame) and self._done is not None:
            self._done.set()  # stop the audio
        elif isinstance(frame, LLMFullResponseStartFrame):
            self._text = ""
        elif isinstance(frame, LLMTextFrame):
            self._text += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self._text:
            done = self._done = asyncio.Event()
            if not self.hold:
                done.set()
            self.hold = False
            self.create_task(self._play(self._text, done))
        await self.push_frame(frame, direction)

    async def _play(self, text: str, done: asyncio.Event) -> None:
        await self.broadcast_frame(BotStartedSpeakingFrame)
        await self.push_frame(TTSTextFrame(text, text_type="sentence"))
        self.playing.set()
        await done.wait()
        self.playing.clear()
        await self.broadcast_frame(BotStoppedSpeakingFrame)

    def finish(self) -> None:
        if self._done is not None:
            self._done.set()


@dataclass
class Bot:
    worker: PipelineWorker
    speaker: ScriptedSpeaker
    context: LLMContext


def build(llm: ScriptedLLM, bridge: SettledPipecat | None, tools: ToolsSchema) -> Bot:
    """The pipeline of a bot: user context, LLM, speech out, assistant context."""
    context = LLMContext([{"role": "system", "content": INSTRUCTIONS}], tools=tools)
    pair = LLMContextAggregatorPair(context)
    speaker = ScriptedSpeaker()
    pipeline = Pipeline([pair.user(), llm, speaker, pair.assistant()])
    observers = [bridge.observer()] if bridge else []
    worker = PipelineWorker(pipeline, observers=observers, cancel_on_idle_timeout=False)
    return Bot(worker, speaker, context)


async def say(worker: PipelineWorker, llm: ScriptedLLM, line: str, *, wait: bool = True) -> None:
    """The caller says one line; with `wait`, until the bot answers it."""
    llm.replied.clear()
    await worker.queue_frame(LLMMessagesAppendFrame([{"role": "user", "content": line}], run_llm=True))
    if wait:
        await asyncio.wait_for(llm.replied.wait(), 20)


async def call(api_url: str, conversation_id: str, order_id: str) -> dict[str, Any]:
    """One scripted call: ask for a refund, ask whether it is done, hang up; then the handoff."""
    script = RefundScript(refund={"order_id": order_id, "amount": 25.5, "currency": "EUR"})
    async with SettledClient(api_url) as client:
        bridge = SettledPipecat(
            client, conversation_id, load_action_kinds(names=["refund"]), authorize_on_call=True
        )
        llm = ScriptedLLM(script)
        bridge.register(llm)
        worker = build(llm, bridge, tools=bridge.tools_schema()).worker
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        bridge.settled.opened()
        for line in CALLER:
            await say(worker, llm, line.format(order_id=order_id))
        await worker.queue_frame(EndFrame())  # the caller hangs up
        await running
        await bridge.aclose()
        handoff = await client.handoff(conversation_id)
    return {"said": script.said, "handoff": handoff}


def main() -> None:
    from loguru import logger

    logger.remove()  # Pipecat logs every frame at DEBUG; the example prints the conversation instead
    run_example(__doc__, call)


if __name__ == "__main__":
    main()
