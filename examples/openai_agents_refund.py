"""A refund over an OpenAI Agents SDK realtime agent, with settled keeping the truth.

    make dev                                   # settled, Temporal and the sandbox services
    python -m examples.openai_agents_refund    # a scripted call against them

The scripted model stands in for the realtime API and `Speaker` for the caller's audio output, so
this runs offline; with a real one, pass `OpenAIRealtimeWebSocketModel()` (or nothing) to
`RealtimeRunner` and play the session's audio as usual, telling `bridge.playback` what played: the
bridge's tools, `watch` and `playback` stay the same.
"""

import asyncio
import itertools
from typing import Any

from agents.realtime import RealtimeAgent, RealtimePlaybackTracker, RealtimeRunner, RealtimeSessionEvent
from agents.realtime.items import AssistantAudio, AssistantMessageItem
from agents.realtime.model import RealtimeModel, RealtimeModelConfig, RealtimeModelListener
from agents.realtime.model_events import (
    RealtimeModelAudioDoneEvent,
    RealtimeModelAudioEvent,
    RealtimeModelAudioInterruptedEvent,
    RealtimeModelEvent,
    RealtimeModelItemUpdatedEvent,
    RealtimeModelToolCallEvent,
    RealtimeModelTranscriptDeltaEvent,
    RealtimeModelTurnEndedEvent,
    RealtimeModelTurnStartedEvent,
)
from agents.realtime.model_inputs import (
    RealtimeModelSendEvent,
    RealtimeModelSendInterrupt,
    RealtimeModelSendToolOutput,
    RealtimeModelSendUserInput,
)
from settled.adapters.common import action_kinds
from settled.adapters.openai_agents import SettledRealtime

from examples.scripted import FILLER, RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount with the caller before calling "
    "the refund tool. Say only what the tools tell you; never say a refund is done unless a tool "
    "says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]
# pcm16 at 24 kHz mono, the realtime API's default output format.
PCM16_24K_BYTES_PER_MS = 48.0


class ScriptedRealtimeModel(RealtimeModel):
    """A realtime model transport that follows a `RefundScript` and speaks what its tools return.

    Each spoken line comes with `speech_ms` of silent pcm16 audio, so a barge-in can cut it off: as
    one audio event, or streamed in events of `chunk_ms`. With `holding` set, the model says that
    line first whenever a tool result comes in (its own item, right before the result's).
    """

    def __init__(
        self,
        script: RefundScript,
        *,
        call_prefix: str = "call",
        speech_ms: int = 10_000,
        chunk_ms: int | None = None,
        holding: str | None = None,
    ) -> None:
        self.script = script
        self.speech_ms = speech_ms
        self.chunk_ms = chunk_ms
        self.holding = holding
        self.replied = asyncio.Event()
        self._listeners: list[RealtimeModelListener] = []
        self._ids = itertools.count(1)
        self._call_prefix = call_prefix
        self._last_item: str | None = None
        self.call_ids: list[str] = []

    async def connect(self, options: RealtimeModelConfig) -> None:
        return None

    def add_listener(self, listener: RealtimeModelListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: RealtimeModelListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def close(self) -> None:
        self._listeners.clear()

    async def send_event(self, event: RealtimeModelSendEvent) -> None:
        if isinstance(event, RealtimeModelSendUserInput):
            text = event.user_input if isinstance(event.user_input, str) else _text_of(event.user_input)
            call = self.script.decide(text)
            if call is None:
                await self._speak(self.script.small_talk(text))
                self.replied.set()
                return
            call_id = f"{self._call_prefix}_{next(self._ids)}"
            self.call_ids.append(call_id)
            await self._speak(FILLER, then=RealtimeModelToolCallEvent(call.name, call_id, call.json))
        elif isinstance(event, RealtimeModelSendToolOutput) and event.start_response:
            if self.holding:
                await self._speak(self.holding)
            await self._speak(self.script.reply(event.output))
            self.replied.set()
        elif isinstance(event, RealtimeModelSendInterrupt):
            await self.barge_in()

    async def barge_in(self) -> None:
        """The caller starts talking: the transport reports the current audio as interrupted."""
        if self._last_item is not None:
            await self._emit(RealtimeModelAudioInterruptedEvent(item_id=self._last_item, content_index=0))

    async def _speak(self, text: str, then: RealtimeModelEvent | None = None) -> None:
        n = next(self._ids)
        item, response = f"item_{self._call_prefix}_{n}", f"resp_{self._call_prefix}_{n}"
        self._last_item = item
        audio = bytes(int(self.speech_ms * PCM16_24K_BYTES_PER_MS))
        step = int((self.chunk_ms or self.speech_ms) * PCM16_24K_BYTES_PER_MS)
        message = AssistantMessageItem(
            item_id=item, content=[AssistantAudio(transcript=text)], status="completed"
        )
        for event in (
            RealtimeModelTurnStartedEvent(response_id=response),
            RealtimeModelTranscriptDeltaEvent(item_id=item, delta=text, response_id=response),
            *(
                RealtimeModelAudioEvent(
                    data=audio[at : at + step], response_id=response, item_id=item, content_index=0
                )
                for at in range(0, len(audio), step)
            ),
            RealtimeModelAudioDoneEvent(item_id=item, content_index=0),
            RealtimeModelItemUpdatedEvent(item=message),
            *([then] if then else []),
            RealtimeModelTurnEndedEvent(response_id=response),
        ):
            await self._emit(event)

    async def _emit(self, event: RealtimeModelEvent) -> None:
        for listener in list(self._listeners):
            await listener.on_event(event)


def _text_of(message: Any) -> str:
    return " ".join(part.get("text", "") for part in message.get("content", []))


class Speaker:
    """The caller's audio output: plays the session's audio at real-time speed, `chunk_ms` at a
    time, and tells the playback tracker each chunk once it has played. A barge-in
    (`audio_interrupted`) drops everything not played yet, as a real output does. `heard` and
    `lengths` are what the caller heard and what was generated, in ms per item."""

    def __init__(self, playback: RealtimePlaybackTracker, chunk_ms: int = 20) -> None:
        self.playback = playback
        self.chunk_ms = chunk_ms
        self.heard: dict[str, float] = {}
        self.lengths: dict[str, float] = {}
        self.texts: dict[str, str] = {}
        self._queue: asyncio.Queue[tuple[int, str, int, bytes]] = asyncio.Queue()
        self._epoch = 0
        self._changed = asyncio.Condition()

    def take(self, event: RealtimeSessionEvent) -> None:
        """One session event, as the app's event loop hands it over."""
        if event.type == "audio":
            data, step = event.audio.data, int(self.chunk_ms * PCM16_24K_BYTES_PER_MS)
            for at in range(0, len(data), step):
                self._queue.put_nowait(
                    (self._epoch, event.item_id, event.content_index, data[at : at + step])
                )
            self.lengths[event.item_id] = (
                self.lengths.get(event.item_id, 0) + len(data) / PCM16_24K_BYTES_PER_MS
            )
        elif event.type == "audio_interrupted":
            self._epoch += 1  # what is queued, and the chunk now playing, is never heard
        elif event.type == "raw_model_event" and event.data.type == "transcript_delta":
            self.texts[event.data.item_id] = self.texts.get(event.data.item_id, "") + event.data.delta

    async def play(self) -> None:
        """Play until cancelled (the caller hangs up)."""
        while True:
            epoch, item, index, chunk = await self._queue.get()
            if epoch == self._epoch:
                await asyncio.sleep(len(chunk) / PCM16_24K_BYTES_PER_MS / 1000)  # real time
            if epoch == self._epoch:
                self.heard[item] = self.heard.get(item, 0) + len(chunk) / PCM16_24K_BYTES_PER_MS
                self.playback.on_play_bytes(item, index, chunk)
                async with self._changed:
                    self._changed.notify_all()

    async def until(self, part: str, heard_ms: float | None = None, timeout_s: float = 20) -> None:
        """Until the caller heard `heard_ms` of the line that says `part` (None: all of it)."""

        def reached() -> bool:
            item = self.item_saying(part)
            wanted = self.lengths.get(item, 0) if heard_ms is None and item else heard_ms
            return item is not None and wanted is not None and self.heard.get(item, 0) >= wanted

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(reached), timeout_s)

    def item_saying(self, part: str) -> str | None:
        return next((item for item, text in self.texts.items() if part in text), None)

    def heard_of(self, part: str) -> float:
        """How many ms the caller heard of the line that says `part`."""
        item = self.item_saying(part)
        return self.heard.get(item, 0.0) if item else 0.0


async def say_and_wait(session: Any, model: ScriptedRealtimeModel, line: str, timeout_s: float = 20) -> None:
    """Send one caller line and wait for the model's answer to it."""
    model.replied.clear()
    await session.send_message(line)
    await asyncio.wait_for(model.replied.wait(), timeout_s)


async def call(api_url: str, conversation_id: str, order_id: str) -> dict[str, Any]:
    """One scripted call: ask for a refund, ask whether it is done, hang up; then the handoff."""
    script = RefundScript(refund={"order_id": order_id, "amount": 25.5, "currency": "EUR"})
    model = ScriptedRealtimeModel(script, speech_ms=50, chunk_ms=20)
    async with SettledClient(api_url) as client:
        # The agent confirms with the caller before calling, so the call itself is the go-ahead.
        bridge = SettledRealtime(
            client, conversation_id, await action_kinds(client, names=["refund"]), authorize_on_call=True
        )
        agent = RealtimeAgent(name="refunds", instructions=INSTRUCTIONS, tools=bridge.tools())
        speaker = Speaker(bridge.playback)
        session = await RealtimeRunner(agent, model=model).run(
            model_config={"playback_tracker": bridge.playback}
        )
        playing = asyncio.create_task(speaker.play())
        async with session:
            watching = asyncio.create_task(_play(bridge, session, speaker))
            for line in CALLER:
                await say_and_wait(session, model, line.format(order_id=order_id))
            await speaker.until(script.said[-1])  # the caller hears the last answer, then hangs up
        await watching  # the session closed: the bridge records the hangup
        playing.cancel()
        await bridge.aclose()
        handoff = await client.handoff(conversation_id)
    return {"said": script.said, "handoff": handoff}


async def _play(bridge: SettledRealtime, session: Any, speaker: Speaker) -> None:
    async for event in bridge.watch(session):
        speaker.take(event)


def main() -> None:
    run_example(__doc__, call)


if __name__ == "__main__":
    main()
