"""settled under the OpenAI Agents SDK's realtime agents (`pip install 'settled[openai-agents]'`).

The SDK runs a realtime tool as a background task beside the audio: an interruption stops only the
audio, and closing the session cancels the task, wherever its request is. With this bridge the
tool records a durable action instead (and waits briefly for the business system), so the result
the model speaks is the verified state, and the action goes on after the call ends.

    bridge = SettledRealtime(client, conversation_id, load_action_kinds(names=["refund"]))
    agent = RealtimeAgent(name="support", instructions=..., tools=bridge.tools())
    async with await RealtimeRunner(agent).run() as session:
        async for event in bridge.watch(session):
            ...  # your audio playback, as before

`watch` forwards the session's events to settled: `audio_interrupted` of audio still playing as
`interrupted`, each spoken result as `presented` (completed unless its audio was interrupted), and
the end of the session as `channel_closed` (`hangup` when the session is closed, `dropped` when
the model connection fails).
"""

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

try:
    from agents import FunctionTool, function_tool
    from agents.realtime import RealtimeSession, RealtimeSessionEvent
    from agents.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError(
        "adapters.openai_agents needs the OpenAI Agents SDK: pip install 'settled[openai-agents]'"
    ) from error

from adapters.common import (
    AUTHORIZE_DESCRIPTION,
    AUTHORIZE_TOOL,
    CHECK_DESCRIPTION,
    CHECK_TOOL,
    ActionKind,
    SettledChannel,
)
from settled.client import SettledClient
from settled.models import Channel

# pcm16 at 24 kHz mono, the realtime API's default output format.
PCM16_24K_BYTES_PER_MS = 48.0


@dataclass
class _Audio:
    first_at: float
    bytes: int = 0


class SettledRealtime:
    """One realtime session (one conversation) bound to settled."""

    def __init__(
        self,
        client: SettledClient,
        conversation_id: str,
        kinds: list[ActionKind],
        *,
        channel: Channel = "voice",
        wait_s: float = 2.0,
        authorize_on_call: bool = False,
        audio_bytes_per_ms: float = PCM16_24K_BYTES_PER_MS,
    ) -> None:
        self.settled = SettledChannel(
            client,
            conversation_id,
            kinds,
            channel=channel,
            wait_s=wait_s,
            authorize_on_call=authorize_on_call,
        )
        self._bytes_per_ms = audio_bytes_per_ms
        self._audio: dict[str, _Audio] = {}

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

        # The kind's JSON Schema is the contract's, not necessarily strict-mode shaped: pass it as is.
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
            audio = self._audio.setdefault(event.item_id, _Audio(first_at=time.monotonic()))
            audio.bytes += len(event.audio.data)
            self.settled.turn_started(event.item_id)
        elif event.type == "raw_model_event":
            data = event.data
            if data.type in ("transcript_delta", "output_text_delta"):
                self.settled.turn_started(data.item_id)
                self.settled.turn_text(data.item_id, data.delta)
            elif data.type == "connection_status" and data.status == "disconnected":
                self.settled.closed("dropped")
        elif event.type == "audio_end":
            # Generated to the end; an interruption while it still plays revises this below.
            self.settled.turn_ended(event.item_id, completed=True)
        elif event.type == "audio_interrupted" and self._still_playing(event.item_id):
            self.settled.interrupted()
            self.settled.turn_ended(event.item_id, completed=False)

    def _still_playing(self, item_id: str) -> bool:
        """The SDK's own playback model (no custom tracker): audio plays from its first chunk at
        realtime speed. The transport also reports an "interruption" of audio that already ended
        whenever the caller starts to speak; that is the caller's turn, not a cut-off."""
        audio = self._audio.get(item_id)
        if audio is None:
            return True
        played_ms = (time.monotonic() - audio.first_at) * 1000
        return played_ms < audio.bytes / self._bytes_per_ms

    def closed(self, reason: str = "hangup") -> None:
        self.settled.closed(reason)

    async def aclose(self) -> None:
        await self.settled.aclose()
