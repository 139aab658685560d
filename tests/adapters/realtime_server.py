"""A scripted OpenAI Realtime server over a real WebSocket, for the SDK's own
`OpenAIRealtimeWebSocketModel`: it follows a `RefundScript` the way `ScriptedRealtimeModel` does (a
filler with the tool call, then the tool's sentence), speaking the GA wire protocol, and streams
each line's audio faster than real time, as the real service does. `barge_in()` sends
`input_audio_buffer.speech_started`, which is how the service reports the caller starting to speak."""

import base64
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve

from examples.openai_agents_refund import PCM16_24K_BYTES_PER_MS
from examples.scripted import FILLER, RefundScript


class ScriptedRealtimeServer:
    def __init__(self, script: RefundScript, *, speech_ms: int, chunk_ms: int = 100) -> None:
        self.script = script
        self.speech_ms = speech_ms
        self.chunk_ms = chunk_ms
        self._ids = itertools.count(1)
        self._connection: ServerConnection | None = None
        self._server: Server | None = None
        self._pending_output: str | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/v1/realtime"

    @asynccontextmanager
    async def running(self) -> AsyncIterator["ScriptedRealtimeServer"]:
        async with serve(self._serve, "127.0.0.1", 0) as server:
            self._server = server
            yield self

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    async def _send(self, type_: str, **fields: Any) -> None:
        assert self._connection is not None
        await self._connection.send(json.dumps({"type": type_, "event_id": self._id("event"), **fields}))

    async def _serve(self, connection: ServerConnection) -> None:
        self._connection = connection
        session = {"type": "realtime", "model": "gpt-realtime", "object": "realtime.session"}
        await self._send("session.created", session=session)
        user_text: str | None = None
        async for raw in connection:
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "session.update":
                await self._send("session.updated", session=session)
            elif kind == "conversation.item.create":
                item = message["item"]
                if item.get("type") == "message" and item.get("role") == "user":
                    user_text = " ".join(part.get("text", "") for part in item.get("content", []))
                elif item.get("type") == "function_call_output":
                    self._pending_output = item["output"]
            elif kind == "response.create":
                if self._pending_output is not None:
                    output, self._pending_output = self._pending_output, None
                    await self._respond(self.script.reply(output))
                elif user_text is not None:
                    text, user_text = user_text, None
                    call = self.script.decide(text)
                    if call is None:
                        await self._respond(self.script.small_talk(text))
                    else:
                        await self._respond(FILLER, tool_call=(call.name, call.json))

    async def _respond(self, text: str, tool_call: tuple[str, str] | None = None) -> None:
        response, item = self._id("resp"), self._id("item")
        where = {"response_id": response, "item_id": item, "output_index": 0, "content_index": 0}
        await self._send("response.created", response={"id": response, "status": "in_progress"})
        message = {"id": item, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        await self._send("response.output_item.added", response_id=response, output_index=0, item=message)
        await self._send("response.output_audio_transcript.delta", delta=text, **where)
        audio = bytes(int(self.speech_ms * PCM16_24K_BYTES_PER_MS))
        step = int(self.chunk_ms * PCM16_24K_BYTES_PER_MS)
        for at in range(0, len(audio), step):
            delta = base64.b64encode(audio[at : at + step]).decode()
            await self._send("response.output_audio.delta", delta=delta, **where)
        await self._send("response.output_audio.done", **where)
        done = {**message, "status": "completed", "content": [{"type": "output_audio", "transcript": text}]}
        await self._send("response.output_item.done", response_id=response, output_index=0, item=done)
        if tool_call is not None:
            name, arguments = tool_call
            call = {
                "id": self._id("item"),
                "type": "function_call",
                "call_id": self._id("call"),
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
            await self._send("response.output_item.done", response_id=response, output_index=1, item=call)
        await self._send("response.done", response={"id": response, "status": "completed"})

    async def barge_in(self) -> None:
        """The caller starts to speak: the service's voice activity detection says so."""
        await self._send("input_audio_buffer.speech_started", audio_start_ms=0, item_id=self._id("item"))
