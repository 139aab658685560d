"""A scripted Gemini Live model for ADK, offline: a `BaseLlm` whose `connect()` opens a
`BaseLlmConnection` (ADK's own live model interfaces) playing the server's part, and the caller's
audio output, which plays the model's audio in real time and reports it to the bridge.

The connection does what the Live server does with what ADK sends it: the caller's words start a
model turn (a tool call, or a line); caller speech while the model's last audio still lasts by the
server's clock interrupts it; a function response is spoken at once, when idle (`WHEN_IDLE`: its
turns are generated at once, so it is idle as soon as a turn is sent), or never (`SILENT`: the model
only takes note). Each line is its output transcription, then its audio (24 kHz 16-bit mono, every
byte the line's number, so the output knows whose audio it plays), then `turn_complete`.

Google orders output transcription with itself, not with the model's turn; the connection can send it
late, as ADK yields it: `transcription_late_s` after the line's audio and `turn_complete`, its
`finished` piece only at the next interruption or turn end (ADK flushes what it holds there); or
`split`, half with the audio (flushed at generation complete) and the rest late, then flushed at the
turn's end, which waits for it.
"""

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.genai import types
from pydantic import ConfigDict
from settled.adapters.google_adk import SettledLive

from examples.scripted import VERIFY_TOOL, RefundScript

BYTES_PER_MS = 48  # 24 kHz, 16-bit mono: what Gemini Live speaks


class ScriptedLive(BaseLlmConnection):
    def __init__(
        self,
        script: RefundScript,
        *,
        call_prefix: str,
        ms_per_char: float = 12.0,
        chunk_ms: int = 20,
        filler: str | None = None,
        transcription_late_s: float = 0.0,
        split: bool = False,
    ) -> None:
        self.script = script
        self.lines: list[str] = []  # every line spoken; line n's audio bytes are all n
        self.said_at: list[tuple[float, str]] = []  # (time.time(), line) of each line the model said
        self.noted: list[str] = []  # function responses taken silently
        self._prefix, self._calls = call_prefix, 0
        self._ms_per_char, self._chunk_ms, self._filler = ms_per_char, chunk_ms, filler
        self._out: asyncio.Queue[LlmResponse | None] = asyncio.Queue()
        self._audio_until = 0.0  # by the server's clock, when its last audio ends playing
        self._closed = False
        self._late_s, self._split = transcription_late_s, split
        self._unflushed = ""  # transcription ADK holds until its next flush

    async def send_history(self, history: list[types.Content]) -> None:
        pass

    async def send_realtime(self, blob: Any) -> None:
        pass

    async def send_content(self, content: types.Content) -> None:
        parts = content.parts or []
        answers = [part.function_response for part in parts if part.function_response]
        for answer in answers:
            self._answered(answer)
        if answers:
            return
        text = " ".join(part.text for part in parts if part.text)
        if time.monotonic() < self._audio_until:  # the caller cut in
            self._audio_until = 0.0
            self._signal(LlmResponse(interrupted=True))
        call = self.script.decide(text)
        if call is None:
            self._speak(self.script.small_talk(text))
            return
        self._calls += 1
        function_call = types.FunctionCall(
            id=f"{self._prefix}_{self._calls}", name=call.name, args=call.arguments
        )
        self._out.put_nowait(
            LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=function_call)]))
        )
        if self._filler and call.name != VERIFY_TOOL:  # said while a non-blocking request runs
            self._speak(self._filler)
        else:
            self._signal(LlmResponse(turn_complete=True))

    def _answered(self, answer: types.FunctionResponse) -> None:
        output = str((answer.response or {}).get("result", answer.response))
        if answer.scheduling is types.FunctionResponseScheduling.SILENT:
            self.noted.append(output)
            return
        if (
            answer.scheduling is types.FunctionResponseScheduling.INTERRUPT
            and time.monotonic() < self._audio_until
        ):
            self._signal(LlmResponse(interrupted=True))
        self._speak(self.script.reply(output))

    def _speak(self, line: str) -> None:
        if line not in self.script.said:
            self.script.said.append(line)
        self.lines.append(line)
        self.said_at.append((time.time(), line))
        marker = len(self.lines)
        late_from = len(line) if not self._late_s else len(line) // 2 if self._split else 0
        on_time, late = line[:late_from], line[late_from:]
        self._transcribe(on_time)
        duration_ms = len(line) * self._ms_per_char
        for start in range(0, int(duration_ms), self._chunk_ms):
            chunk = bytes([marker]) * int(min(self._chunk_ms, duration_ms - start) * BYTES_PER_MS)
            blob = types.Blob(mime_type="audio/pcm;rate=24000", data=chunk)
            self._out.put_nowait(
                LlmResponse(content=types.Content(role="model", parts=[types.Part(inline_data=blob)]))
            )
        self._flush()  # generation complete
        self._audio_until = max(self._audio_until, time.monotonic()) + duration_ms / 1000
        if not late:
            self._signal(LlmResponse(turn_complete=True))
        elif self._split:  # the rest, then the turn's end, which flushes it
            asyncio.get_running_loop().call_later(self._late_s, self._late, late, True)
        else:  # the turn ends now; its words come later, flushed by whatever signal comes next
            self._signal(LlmResponse(turn_complete=True))
            asyncio.get_running_loop().call_later(self._late_s, self._late, late, False)

    def _late(self, text: str, then_turn_complete: bool) -> None:
        if self._closed:
            return
        self._transcribe(text)
        if then_turn_complete:
            self._signal(LlmResponse(turn_complete=True))

    def _transcribe(self, text: str) -> None:
        """`text` as ADK yields a transcription: pieces of a few words each, held for the next flush."""
        words = text.split(" ")
        for start in range(0, len(words), 4):
            piece = " ".join(words[start : start + 4]) + (" " if start + 4 < len(words) else "")
            if piece.strip():
                self._unflushed += piece
                transcription = types.Transcription(text=piece, finished=False)
                self._out.put_nowait(LlmResponse(output_transcription=transcription, partial=True))

    def _flush(self) -> None:
        if self._unflushed:
            finished = types.Transcription(text=self._unflushed, finished=True)
            self._out.put_nowait(LlmResponse(output_transcription=finished))
            self._unflushed = ""

    def _signal(self, response: LlmResponse) -> None:
        """An interruption or a turn's end: ADK flushes the transcription it holds before it."""
        self._flush()
        self._out.put_nowait(response)

    async def receive(self) -> AsyncGenerator[LlmResponse, None]:
        while not self._closed:
            response = await self._out.get()
            if response is None:
                self._closed = True
                return
            yield response

    async def close(self) -> None:
        self._out.put_nowait(None)


class ScriptedGemini(BaseLlm):
    """The live model ADK connects to: always the one scripted connection."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    connection: ScriptedLive

    async def generate_content_async(  # type: ignore[override]
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        raise NotImplementedError("a live model only: runner.run_live")
        yield LlmResponse()

    @asynccontextmanager
    async def connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:  # type: ignore[override]
        yield self.connection


class Speaker:
    """The caller's audio output: each chunk takes its real duration to play, then is reported to the
    bridge. An interruption drops what has not played; after `hang_up()` nothing plays any more."""

    def __init__(self, bridge: SettledLive, lines: list[str], ms_per_char: float) -> None:
        self.bridge, self.lines, self.ms_per_char = bridge, lines, ms_per_char
        self.heard_ms: dict[int, float] = {}  # by line number
        self.gone = False
        self._queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._epoch = 0
        self._changed = asyncio.Condition()
        self._playing = asyncio.create_task(self._play())

    def handle(self, event: Any) -> None:
        if event.interrupted:
            self._epoch += 1
        for part in (event.content.parts or []) if event.content else []:
            if part.inline_data is not None and part.inline_data.data:
                self._queue.put_nowait((self._epoch, part.inline_data.data))

    async def _play(self) -> None:
        while True:
            epoch, chunk = await self._queue.get()
            if epoch != self._epoch or self.gone:
                continue
            ms = len(chunk) / BYTES_PER_MS
            await asyncio.sleep(ms / 1000)  # real time
            if epoch != self._epoch or self.gone:
                continue
            self.bridge.played(chunk)
            async with self._changed:
                self.heard_ms[chunk[0]] = self.heard_ms.get(chunk[0], 0.0) + ms
                self._changed.notify_all()

    def heard_of(self, text: str) -> float:
        return max((ms for n, ms in self.heard_ms.items() if text in self.lines[n - 1]), default=0.0)

    async def until(self, text: str, heard_ms: float | None = None, timeout_s: float = 20) -> None:
        """Until a line containing `text` has played for `heard_ms` (None: to its end)."""

        def reached() -> bool:
            for n, line in enumerate(self.lines, start=1):
                if text in line:
                    whole = len(line) * self.ms_per_char if heard_ms is None else heard_ms
                    if self.heard_ms.get(n, 0.0) >= whole - 0.5:
                        return True
            return False

        try:
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(reached)
        except TimeoutError:
            raise AssertionError(f"never heard {text!r}; said {self.lines}, heard {self.heard_ms}") from None

    def hang_up(self) -> None:
        self.gone = True

    async def aclose(self) -> None:
        self._playing.cancel()
