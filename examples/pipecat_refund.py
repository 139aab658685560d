"""A refund over a Pipecat pipeline, with settled keeping the truth.

    make dev                              # settled, Temporal and the sandbox services
    python -m examples.pipecat_refund     # a scripted call against them

`ScriptedLLM` stands in for the LLM service, `ScriptedTTS` for the TTS service and `Loudspeaker`
for the call's output transport (its audio takes real time to play), so this runs offline. In a
real bot, keep the three settled lines (`register`, `tools_schema`, `observer`) and put your STT,
LLM, TTS and transport back in the pipeline.
"""

import asyncio
import itertools
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators import async_tool_messages
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings, TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.workers.runner import WorkerRunner
from settled.adapters.common import action_kinds
from settled.adapters.pipecat import SettledPipecat

from examples.hearing import Hearing
from examples.scripted import FILLER, RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount before calling the refund tool. "
    "Say only what the tools tell you; never say a refund is done unless a tool says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]
SAMPLE_RATE = 16_000


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
    something (saying `filler` with the call, when set), and says each tool result it gets (final,
    intermediate, or CANCELLED; `holding` first, as a response of its own, when set). `lines` is
    what each response said, by the id of its start frame."""

    def __init__(
        self,
        script: RefundScript,
        *,
        call_prefix: str = "call",
        filler: str | None = None,
        holding: str | None = None,
    ) -> None:
        super().__init__(settings=_SETTINGS)
        self.script = script
        self.filler = filler
        self.holding = holding
        self.lines: dict[int, str] = {}
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
            if self.filler:
                await self._say(self.filler, replied=False)
            await self.run_function_calls([FunctionCallFromLLM(call.name, call_id, call.arguments, context)])
            return
        if results:
            if self.holding:
                await self._say(self.holding, replied=False)
            await self._say(self.script.reply(results[-1]))

    async def _say(self, text: str, replied: bool = True) -> None:
        start = LLMFullResponseStartFrame()
        self.lines[start.id] = text
        await self.push_frame(start)
        await self.push_frame(LLMTextFrame(text))
        await self.push_frame(LLMFullResponseEndFrame())
        if replied:
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


class ScriptedTTS(TTSService):
    """A TTS service that "speaks" each sentence as `ms_per_char` of silent audio per character:
    streamed in chunks of `chunk_ms`, or (None) as one frame per sentence, as some services do."""

    def __init__(self, *, ms_per_char: float = 4.0, chunk_ms: int | None = 20) -> None:
        super().__init__(
            sample_rate=SAMPLE_RATE,
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(model="scripted", voice="scripted", language=None),
        )
        self.ms_per_char = ms_per_char
        self.chunk_ms = chunk_ms

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        audio = bytes(2 * int(SAMPLE_RATE * len(text) * self.ms_per_char / 1000))
        step = 2 * int(SAMPLE_RATE * self.chunk_ms / 1000) if self.chunk_ms else len(audio)
        for at in range(0, len(audio), step):
            yield TTSAudioRawFrame(audio[at : at + step], SAMPLE_RATE, 1, context_id=context_id)


class Loudspeaker(BaseOutputTransport, Hearing):
    """The output transport of a call: each chunk takes its real duration to play, and `heard` is
    what the caller heard, in ms per response (by its text, in playout order). After `hang_up()`
    the line is dead: nothing written plays any more, as on a real call."""

    def __init__(self, lines: dict[int, str]) -> None:
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=SAMPLE_RATE))
        self.lines = lines
        self.heard: list[tuple[str, float]] = []  # (text, ms heard), one per response
        self.finished: list[str] = []  # the responses whose audio all played
        self.gone = False
        self.changed = asyncio.Event()

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        if self.gone:
            return False
        ms = len(frame.audio) / 2 / frame.sample_rate * 1000
        await asyncio.sleep(ms / 1000)  # real time
        if self.gone or not self.heard:
            return not self.gone
        text, heard = self.heard[-1]
        self.heard[-1] = (text, heard + ms)
        self.changed.set()
        return True

    async def write_transport_frame(self, frame: Frame) -> None:
        # Reached in playout order: what follows is this response's audio.
        if isinstance(frame, LLMFullResponseStartFrame):
            self.heard.append((self.lines.get(frame.id, ""), 0.0))
        elif isinstance(frame, LLMFullResponseEndFrame) and self.heard and not self.gone:
            self.finished.append(self.heard[-1][0])
            self.changed.set()

    def hang_up(self) -> None:
        self.gone = True

    def heard_of(self, part: str) -> float:
        """How many ms the caller heard of the response that says `part`."""
        return next((ms for text, ms in self.heard if part in text), 0.0)


@dataclass
class Bot:
    worker: PipelineWorker
    speaker: Loudspeaker
    context: LLMContext


def build(
    llm: ScriptedLLM, bridge: SettledPipecat | None, tools: ToolsSchema, tts: ScriptedTTS | None = None
) -> Bot:
    """The pipeline of a bot: user context, LLM, TTS, the call's audio out, assistant context."""
    context = LLMContext([{"role": "system", "content": INSTRUCTIONS}], tools=tools)
    pair = LLMContextAggregatorPair(context)
    speaker = Loudspeaker(llm.lines)
    pipeline = Pipeline([pair.user(), llm, tts or ScriptedTTS(), speaker, pair.assistant()])
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
            client, conversation_id, await action_kinds(client, names=["refund"]), authorize_on_call=True
        )
        llm = ScriptedLLM(script, filler=FILLER)
        bridge.register(llm)
        bot = build(llm, bridge, tools=bridge.tools_schema())
        worker = bot.worker
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        bridge.settled.opened()
        for line in CALLER:
            await say(worker, llm, line.format(order_id=order_id))
        # The caller hears the last answer to its end, then hangs up.
        await bot.speaker.until(script.said[-1])
        await bridge.settled.flush()
        bot.speaker.hang_up()
        await worker.queue_frame(EndFrame())
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
