"""A refund over an OpenAI Agents SDK realtime agent, with settled keeping the truth.

    make dev                                   # settled, Temporal and the sandbox services
    python -m examples.openai_agents_refund    # a scripted call against them

The scripted model stands in for the realtime API so this runs offline; with a real one, pass
`OpenAIRealtimeWebSocketModel()` (or nothing) to `RealtimeRunner` and play the session's audio as
usual: the bridge's tools and `watch` stay the same.
"""

import asyncio
import itertools
from typing import Any

from agents.realtime import RealtimeAgent, RealtimeRunner
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

from adapters.common import load_action_kinds
from adapters.openai_agents import PCM16_24K_BYTES_PER_MS, SettledRealtime
from examples.scripted import FILLER, RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount with the caller before calling "
    "the refund tool. Say only what the tools tell you; never say a refund is done unless a tool "
    "says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]


class ScriptedRealtimeModel(RealtimeModel):
    """A realtime model transport that follows a `RefundScript` and speaks what its tools return.

    Each spoken line comes with `speech_ms` of silent pcm16 audio, so a barge-in can cut it off.
    """

    def __init__(self, script: RefundScript, *, call_prefix: str = "call", speech_ms: int = 10_000) -> None:
        self.script = script
        self.speech_ms = speech_ms
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
        message = AssistantMessageItem(
            item_id=item, content=[AssistantAudio(transcript=text)], status="completed"
        )
        for event in (
            RealtimeModelTurnStartedEvent(response_id=response),
            RealtimeModelTranscriptDeltaEvent(item_id=item, delta=text, response_id=response),
            RealtimeModelAudioEvent(data=audio, response_id=response, item_id=item, content_index=0),
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


async def say_and_wait(session: Any, model: ScriptedRealtimeModel, line: str, timeout_s: float = 20) -> None:
    """Send one caller line and wait for the model's answer to it."""
    model.replied.clear()
    await session.send_message(line)
    await asyncio.wait_for(model.replied.wait(), timeout_s)


async def call(api_url: str, conversation_id: str, order_id: str) -> dict[str, Any]:
    """One scripted call: ask for a refund, ask whether it is done, hang up; then the handoff."""
    script = RefundScript(refund={"order_id": order_id, "amount": 25.5, "currency": "EUR"})
    model = ScriptedRealtimeModel(script, speech_ms=50)
    async with SettledClient(api_url) as client:
        # The agent confirms with the caller before calling, so the call itself is the go-ahead.
        bridge = SettledRealtime(
            client, conversation_id, load_action_kinds(names=["refund"]), authorize_on_call=True
        )
        agent = RealtimeAgent(name="refunds", instructions=INSTRUCTIONS, tools=bridge.tools())
        session = await RealtimeRunner(agent, model=model).run()
        async with session:
            watching = asyncio.create_task(_drain(bridge, session))
            for line in CALLER:
                await say_and_wait(session, model, line.format(order_id=order_id))
        await watching  # the session closed: the bridge records the hangup
        await bridge.aclose()
        handoff = await client.handoff(conversation_id)
    return {"said": script.said, "handoff": handoff}


async def _drain(bridge: SettledRealtime, session: Any) -> None:
    async for _ in bridge.watch(session):
        pass


def main() -> None:
    run_example(__doc__, call)


if __name__ == "__main__":
    main()
