"""settled under the OpenAI Agents SDK's realtime agents (`pip install 'settled[openai-agents]'`).

The SDK runs a realtime tool as a background task beside the audio: an interruption stops only the
audio, and closing the session cancels the task, wherever its request is. With this bridge the
tool records a durable action instead (and waits briefly for the business system), so the result
the model speaks is the verified state, and the action goes on after the call ends.

    bridge = SettledRealtime(client, conversation_id, load_action_kinds(names=["refund"]))
    agent = RealtimeAgent(name="support", instructions=..., tools=bridge.tools())
    session = await RealtimeRunner(agent).run(model_config={"playback_tracker": bridge.playback})
    async with session:
        async for event in bridge.watch(session):
            ...  # your audio playback, as before; as each chunk has played:
            # bridge.playback.on_play_bytes(item_id, content_index, chunk)

What the caller heard: the SDK's playback tracking. `audio_end` only says the model finished
generating an item's audio, which it does much faster than real time (a hang-up one second into a
four-second confirmation comes after `audio_end`), so it is not "heard". An item counts as heard
when the audio output reported, through `bridge.playback` (the SDK's `RealtimePlaybackTracker`,
which it also uses to truncate the model's memory at a barge-in), that all of its generated audio
played. `audio_interrupted` (a barge-in: the output drops what it has not played) cuts every item
not fully played, and so does the end of the session. Without a playback tracker fed by the audio
output there is no such signal: nothing is then recorded as heard to its end, only as cut off
(a repeat by the next channel, never a loss); so too for an item without audio (text output).

`watch` forwards the session's events to settled: `audio_interrupted` of audio still playing as
`interrupted`, each item that spoke a result as `presented` (completed only when it played to its
end), and the end of the session as `channel_closed` (`hangup` when the session is closed,
`dropped` when the model connection fails), after recording whatever still played as cut off.
"""

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

try:
    from agents import FunctionTool, function_tool
    from agents.realtime import RealtimePlaybackTracker, RealtimeSession, RealtimeSessionEvent
    from agents.realtime._util import calculate_audio_length_ms  # what the SDK's trackers measure with
    from agents.realtime.config import RealtimeAudioFormat
    from agents.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError(
        "adapters.openai_agents needs the OpenAI Agents SDK: pip install 'settled[openai-agents]'"
    ) from error

from settled.adapters.channel import Bridge
from settled.adapters.tools import (
    AUTHORIZE_DESCRIPTION,
    AUTHORIZE_TOOL,
    CHECK_DESCRIPTION,
    CHECK_TOOL,
    ActionKind,
)


@dataclass
class _Audio:
    generated_ms: float = 0.0
    played_ms: float = 0.0
    generated: bool = False  # `audio_end`: no more audio will come for this item

    @property
    def played_out(self) -> bool:
        # Half a millisecond: the two sums of the same chunks may differ by rounding.
        return self.generated and self.played_ms >= self.generated_ms - 0.5


class HeardPlayback(RealtimePlaybackTracker):
    """The SDK's playback tracker, also read by settled: the audio output calls `on_play_bytes`
    (or `on_play_ms`) once a chunk has actually played to the caller."""

    def __init__(self, on_played: Callable[[str, float], None]) -> None:
        super().__init__()
        self._on_played = on_played
        self._audio_format: RealtimeAudioFormat | None = None

    def set_audio_format(self, format: RealtimeAudioFormat) -> None:
        super().set_audio_format(format)
        self._audio_format = format

    def ms_of(self, audio: bytes) -> float:
        """How long this audio plays, by the session's format: the SDK's own measure, so that what
        was generated and what played are counted alike (pcm16 24 kHz, or G.711 8 kHz)."""
        return calculate_audio_length_ms(self._audio_format, audio)

    def on_play_ms(self, item_id: str, item_content_index: int, ms: float) -> None:
        super().on_play_ms(item_id, item_content_index, ms)
        self._on_played(item_id, ms)


class SettledRealtime(Bridge):
    """One realtime session (one conversation) bound to settled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._audio: dict[str, _Audio] = {}
        # Pass it to the session (`model_config={"playback_tracker": bridge.playback}`) and feed it
        # from the audio output: it is how the bridge (and the SDK) know what the caller heard.
        self.playback = HeardPlayback(self._played)

    # -- tools -----------------------------------------------------------------------------------

    def tools(self) -> list[FunctionTool]:
        """One tool per kind, the "did you do it?" tool, and the go-ahead tool when a kind needs it."""
        tools = [self._kind_tool(kind) for kind in self.settled.kinds]
        settled = self.settled

        @function_tool(name_override=CHECK_TOOL, description_override=CHECK_DESCRIPTION)
        async def verify_action(operation_id: str | None = None) -> str:
            return await settled.answer_check(operation_id)

        tools.append(verify_action)
        if settled.needs_authorize_tool:

            @function_tool(name_override=AUTHORIZE_TOOL, description_override=AUTHORIZE_DESCRIPTION)
            async def authorize_action(operation_id: str) -> str:
                return await settled.answer_authorize(operation_id)

            tools.append(authorize_action)
        return tools

    def _kind_tool(self, kind: ActionKind) -> FunctionTool:
        settled = self.settled

        async def invoke(_: ToolContext[Any], arguments: str) -> str:
            try:
                params = json.loads(arguments or "{}")
            except ValueError:
                return "Not recorded: the arguments are not valid JSON. Nothing was sent."
            return await settled.answer_request(kind.name, params)

        # The kind's JSON Schema is the kinds file's, not necessarily strict-mode shaped: pass it as is.
        return FunctionTool(
            name=kind.name,
            description=kind.tool_description(),
            params_json_schema=kind.params_schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    # -- events ----------------------------------------------------------------------------------

    async def watch(
        self, session: RealtimeSession, *, closed_reason: str = "hangup"
    ) -> AsyncIterator[RealtimeSessionEvent]:
        """The session's events, unchanged, each forwarded to settled on the way."""
        self.settled.opened()
        try:
            async for event in session:
                self.handle(event)
                yield event
        except Exception:
            self.settled.closed("dropped")
            raise
        finally:
            self.settled.closed(closed_reason)
            await self.settled.flush()

    def handle(self, event: RealtimeSessionEvent) -> None:
        """Forward one session event (for apps that read the session themselves)."""
        if event.type == "audio":
            self.settled.utterance_started(event.item_id)
            self._audio.setdefault(event.item_id, _Audio()).generated_ms += self.playback.ms_of(
                event.audio.data
            )
        elif event.type == "raw_model_event":
            data = event.data
            if data.type in ("transcript_delta", "output_text_delta"):
                self.settled.utterance_started(data.item_id)
                self.settled.utterance_text(data.item_id, data.delta)
            elif data.type == "connection_status" and data.status == "disconnected":
                self.settled.closed("dropped")
        elif event.type == "audio_end":
            # Generated to the end, which is not heard: it is heard once the output played it all.
            self._audio.setdefault(event.item_id, _Audio()).generated = True
            self._heard_if_played_out(event.item_id)
        elif event.type == "audio_interrupted":
            # The output drops all it has not played. The transport also reports an "interruption"
            # whenever the caller starts to speak after the audio ended: that cuts nothing.
            unplayed = [item for item, audio in self._audio.items() if not audio.played_out]
            for item in unplayed:
                del self._audio[item]
            if unplayed:
                self.settled.interrupted()
            self.settled.cut_off()

    def _played(self, item_id: str, ms: float) -> None:
        audio = self._audio.get(item_id)
        if audio is not None:
            audio.played_ms += ms
            self._heard_if_played_out(item_id)

    def _heard_if_played_out(self, item_id: str) -> None:
        audio = self._audio.get(item_id)
        if audio is not None and audio.played_out:
            del self._audio[item_id]
            self.settled.utterance_ended(item_id, heard=True)
