"""A refund over a LiveKit Agents session, with settled keeping the truth.

    make dev                              # settled, Temporal and the sandbox services
    python -m examples.livekit_refund     # a scripted call against them

`ScriptedLLM` stands in for the LLM, `ScriptedTTS` for the TTS and `Loudspeaker` for the room's
audio output (its audio takes real time to play); the caller types (`session.run`), so this runs
offline without a LiveKit server. In a real agent keep `bridge.tools()` and `bridge.attach(session)`
and start the session in your room as usual.
"""

import asyncio
import itertools
import time
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import Agent, AgentSession, llm, tts
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents.voice import io
from settled.adapters.common import action_kinds
from settled.adapters.livekit import SettledLiveKit

from examples.hearing import Hearing
from examples.scripted import FILLER, RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount before calling the refund tool. "
    "Say only what the tools tell you; never say a refund is done unless a tool says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]
SAMPLE_RATE = 16_000


class ScriptedLLM(llm.LLM):
    """An LLM that follows a `RefundScript`: it calls a tool when the caller asks for something
    (saying `filler` with the call, when set), and says each tool output it gets (including
    LiveKit's progress updates and deferred replies). With `holding` set, it answers anything else
    the caller says with that line, whatever results it has."""

    def __init__(
        self,
        script: RefundScript,
        *,
        call_prefix: str = "call",
        filler: str | None = None,
        holding: str | None = None,
    ) -> None:
        super().__init__()
        self.script = script
        self.filler = filler
        self.holding = holding
        self.call_ids: list[str] = []
        self._prefix = call_prefix
        self._ids = itertools.count(1)
        self._seen: set[str] = set()

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        return _ScriptedStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    def next_chunk(self, chat_ctx: llm.ChatContext) -> llm.ChatChunk | None:
        fresh = [item for item in chat_ctx.items if item.id not in self._seen]
        self._seen.update(item.id for item in chat_ctx.items)
        outputs = [item.output for item in fresh if item.type == "function_call_output"]
        users = [item for item in fresh if item.type == "message" and item.role == "user"]
        if users:
            text = users[-1].text_content or ""
            call = self.script.decide(text)
            if call is not None:
                call_id = f"{self._prefix}_{next(self._ids)}"
                self.call_ids.append(call_id)
                tool_call = llm.FunctionToolCall(name=call.name, arguments=call.json, call_id=call_id)
                return llm.ChatChunk(
                    id=call_id,
                    delta=llm.ChoiceDelta(role="assistant", content=self.filler, tool_calls=[tool_call]),
                )
            if self.holding:
                line = self.holding
            else:
                line = self.script.reply(outputs[-1]) if outputs else self.script.small_talk(text)
        elif outputs:
            line = self.script.reply(outputs[-1])
        else:
            return None
        return llm.ChatChunk(
            id=f"say_{next(self._ids)}", delta=llm.ChoiceDelta(role="assistant", content=line)
        )


class _ScriptedStream(llm.LLMStream):
    async def _run(self) -> None:
        assert isinstance(self._llm, ScriptedLLM)
        chunk = self._llm.next_chunk(self._chat_ctx)
        if chunk is not None:
            self._event_ch.send_nowait(chunk)


class ScriptedTTS(tts.TTS):
    """A TTS that speaks each sentence as `ms_per_char` of audio per character: in frames of
    `chunk_ms`, or (None) as one frame per sentence. Each sentence's samples hold its number in
    `sentences`, so the audio output can tell what it is playing."""

    def __init__(self, *, ms_per_char: float = 4.0, chunk_ms: int | None = 20) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=SAMPLE_RATE, num_channels=1
        )
        self.ms_per_char = ms_per_char
        self.chunk_ms = chunk_ms
        self.sentences: list[str] = []

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _Speech(tts=self, input_text=text, conn_options=conn_options)


class _Speech(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        assert isinstance(self._tts, ScriptedTTS)
        self._tts.sentences.append(self.input_text)
        ms = max(1, int(len(self.input_text) * self._tts.ms_per_char))
        output_emitter.initialize(
            request_id=f"s{len(self._tts.sentences)}",
            sample_rate=SAMPLE_RATE,
            num_channels=1,
            mime_type="audio/pcm",
            frame_size_ms=self._tts.chunk_ms or ms,
        )
        output_emitter.push(np.full(SAMPLE_RATE * ms // 1000, len(self._tts.sentences), np.int16).tobytes())
        output_emitter.flush()


class Loudspeaker(io.AudioOutput, Hearing):
    """The room's audio output: each frame takes its real duration to play, and `heard` is what the
    caller heard, in ms per sentence of `sentences`. `clear_buffer` (an interruption) drops what
    has not played; after `hang_up()` nothing plays any more."""

    def __init__(self, sentences: list[str]) -> None:
        super().__init__(label="loudspeaker", capabilities=io.AudioOutputCapabilities(pause=False))
        self.sentences = sentences
        self.heard: dict[str, float] = {}
        self.finished: list[str] = []  # the sentences whose audio all played
        self.gone = False
        self.changed = asyncio.Event()
        self._queue: asyncio.Queue[tuple[int, rtc.AudioFrame | None]] = asyncio.Queue()
        self._epoch = 0  # one per run of audio between two interruptions
        self._position = 0.0
        self._segment_open = False
        self._playing: asyncio.Task[None] | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._playing is None:
            self._playing = asyncio.create_task(self._play())
        if not self._segment_open:
            self._segment_open, self._position = True, 0.0
            self.on_playback_started(created_at=time.time())
        self._queue.put_nowait((self._epoch, frame))

    def flush(self) -> None:
        super().flush()
        if self._segment_open:
            self._queue.put_nowait((self._epoch, None))  # the segment ends here

    def clear_buffer(self) -> None:
        self._epoch += 1  # what is queued, and the frame now playing, is never heard
        self._end_segment(interrupted=True)

    def _end_segment(self, interrupted: bool) -> None:
        if self._segment_open:
            self._segment_open = False
            self.on_playback_finished(playback_position=self._position, interrupted=interrupted)

    async def _play(self) -> None:
        last: str | None = None
        while True:
            epoch, frame = await self._queue.get()
            if epoch != self._epoch:
                last = None
            elif frame is None:
                if last is not None and not self.gone:
                    self.finished.append(last)
                self._end_segment(interrupted=False)
                last = None
            elif not self.gone:
                await asyncio.sleep(frame.duration)  # real time
                if epoch != self._epoch or self.gone:
                    continue
                sentence = self.sentences[int(frame.data[0]) - 1]
                if last is not None and last != sentence:
                    self.finished.append(last)
                last = sentence
                self.heard[sentence] = self.heard.get(sentence, 0.0) + frame.duration * 1000
                self._position += frame.duration
            self.changed.set()

    def hang_up(self) -> None:
        self.gone = True

    async def aclose(self) -> None:
        """Stop the player (after the session closed)."""
        if self._playing is not None:
            self._playing.cancel()
            await asyncio.gather(self._playing, return_exceptions=True)

    def heard_of(self, part: str) -> float:
        """How many ms the caller heard of the sentences that say `part`."""
        return sum(ms for sentence, ms in self.heard.items() if part in sentence)


async def call(api_url: str, conversation_id: str, order_id: str) -> dict[str, Any]:
    """One scripted call: ask for a refund, ask whether it is done, hang up; then the handoff."""
    script = RefundScript(refund={"order_id": order_id, "amount": 25.5, "currency": "EUR"})
    async with SettledClient(api_url) as client:
        bridge = SettledLiveKit(
            client, conversation_id, await action_kinds(client, names=["refund"]), authorize_on_call=True
        )
        voice = ScriptedTTS()
        session: AgentSession[None] = AgentSession(llm=ScriptedLLM(script, filler=FILLER), tts=voice)
        speaker = Loudspeaker(voice.sentences)
        session.output.audio = speaker
        bridge.attach(session)
        await session.start(Agent(instructions=INSTRUCTIONS, tools=bridge.tools()))
        for line in CALLER:
            await session.run(user_input=line.format(order_id=order_id))
        await speaker.until(script.said[-1].split(". ")[-1])  # heard to its end; then the call ends
        await session.aclose()
        await speaker.aclose()
        await bridge.aclose()
        handoff = await client.handoff(conversation_id)
    return {"said": script.said, "handoff": handoff}


def main() -> None:
    run_example(__doc__, call)


if __name__ == "__main__":
    main()
