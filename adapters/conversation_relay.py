"""Twilio ConversationRelay: Twilio carries the call and speaks with the app over a WebSocket, sending
the caller's words (`prompt`) and, when the caller cuts in, how much of the assistant's words had been
spoken (`interrupt`, `utteranceUntilInterrupt`); the app answers with text for Twilio to speak.

`SettledConversationRelay` sits on the app's side of that WebSocket, on no package but the light
install's: it reads the socket's messages as they arrive (`messages`), the app speaks through it
(`say`), and the app's model's tool calls go through settled (`answer_tool`, the adapters' tool set
and truthful text). `setup` opens the voice channel of conversation `twilio:{callSid}`; the
WebSocket's end closes it (`closed`).

What the caller heard follows the adapters' one rule (`SettledChannel`: heard is ordered evidence).
ConversationRelay has no event for the end of spoken text, so the adapter reads the socket itself,
noting when each message arrived against when each turn was sent (an app that reads only between
its model's answers would hand over late a prompt that came before the turn existed), and counts:
- an `interrupt` that arrived after a turn was sent: Twilio's report of what was spoken before the
  cut. A status is heard only if its sentence is within `utteranceUntilInterrupt`; the rest is cut.
- a `prompt` with no `interrupt` before it, for a turn the caller's speech could interrupt, that
  arrived no sooner than the turn (and every turn before it) could have been spoken at the fastest
  speech (`fastest_ms_per_char`): the caller spoke after it had played, without cutting in. A prompt
  sooner than that was spoken before or while the turn began (it crossed it), and proves nothing.
Nothing else: Twilio having received the text, the caller's words before a turn was sent, and a turn
the caller's speech cannot interrupt (`interruptible` off) prove nothing, and whatever is undecided
when the socket ends is cut. So speak with interruptible text (the default).
"""

import asyncio
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from settled.adapters.channel import SettledChannel
from settled.adapters.tools import ActionKind, ToolSpec, tool_set

from settled.client import SettledClient

Send = Callable[[str], Awaitable[None]]
# A WebSocket closed normally (1000) is a call that ended; any other close, a call that was lost.
NORMAL_CLOSURE = 1000
# ConversationRelay's `interruptible` values under which the caller's speech cuts the assistant.
SPEECH_INTERRUPTS = (True, "any", "speech")


@dataclass
class _Turn:
    """One turn of the assistant's text, from its first token to its verdict."""

    id: str
    interruptible: bool
    text: str = ""
    speaks_until: float | None = None  # by time.monotonic(), the earliest its playback can have ended


class SettledConversationRelay:
    """One ConversationRelay session (one call) seen through settled. `send` sends a text frame on the
    app's WebSocket (whatever serves it: websockets, Starlette, aiohttp)."""

    def __init__(
        self,
        client: SettledClient,
        kinds: list[ActionKind],
        send: Send,
        *,
        wait_s: float = 2.0,
        authorize_on_call: bool = False,
        conversation_prefix: str = "twilio:",
        interruptible: bool | str = True,
        fastest_ms_per_char: float = 50.0,
    ) -> None:
        """`wait_s`: how long a tool call waits for the business system before answering "not
        confirmed yet"; `authorize_on_call`: the tool call itself is the caller's go-ahead (the app's
        model asks before calling); `conversation_prefix`: before the call's `callSid`, the
        conversation's id; `interruptible`: the TwiML's `interruptible` (what may cut the assistant's
        text; a `say` may set its own); `fastest_ms_per_char`: the fastest the voice speaks, in
        milliseconds per character (a prompt sooner than that after a turn was sent crossed it)."""
        self.client = client
        self.kinds = kinds
        self.send = send
        self.wait_s = wait_s
        self.authorize_on_call = authorize_on_call
        self.conversation_prefix = conversation_prefix
        self.interruptible = interruptible
        self.fastest_ms_per_char = fastest_ms_per_char
        self.settled: SettledChannel | None = None
        self._turn_count = 0
        self._open: _Turn | None = None  # the turn being sent (until a token with `last`)
        self._undecided: list[_Turn] = []  # turns sent, oldest first, not yet heard or cut
        self._reader: asyncio.Task[None] | None = None

    @property
    def conversation_id(self) -> str | None:
        return self.settled.conversation_id if self.settled is not None else None

    def tools(self) -> list[ToolSpec]:
        """The tools to give the app's model: one per kind, `verify_action`, `authorize_action`."""
        return tool_set(self.kinds, authorize_tool=not self.authorize_on_call and None)

    # -- what Twilio sends -------------------------------------------------------------------------

    async def messages(self, frames: AsyncIterable[str | bytes]) -> AsyncIterator[dict[str, Any]]:
        """ConversationRelay's messages (`setup`, `prompt`, `interrupt`, `dtmf`, `error`), parsed, for
        the app to act on. The socket (`frames`) is read in the background as messages arrive, so
        what the caller said while the app was busy is known to have come before what it sent next."""
        arrived: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for frame in frames:
                    arrived.put_nowait(self._arrived(frame))
            finally:
                arrived.put_nowait(None)

        self._reader = asyncio.get_running_loop().create_task(read())
        try:
            while (message := await arrived.get()) is not None:
                yield message
            await self._reader  # the socket's own error, if it failed
        finally:
            self._reader.cancel()

    def _arrived(self, frame: str | bytes) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(frame)
        kind = message.get("type")
        if kind == "setup":
            self._set_up(str(message.get("callSid") or message.get("sessionId") or ""))
        elif self.settled is None:
            return message  # nothing of a call before its setup
        elif kind == "interrupt":
            self._cut(str(message.get("utteranceUntilInterrupt") or ""))
        elif kind == "prompt":
            self._spoke_after(time.monotonic())
        return message

    def _set_up(self, call_sid: str) -> None:
        if self.settled is not None or not call_sid:
            return
        self.settled = SettledChannel(
            self.client,
            self.conversation_prefix + call_sid,
            self.kinds,
            channel="voice",
            wait_s=self.wait_s,
            authorize_on_call=self.authorize_on_call,
        )
        self.settled.opened()

    def _spoke_after(self, now: float) -> None:
        """The caller spoke without cutting in: the turns that had surely played by now were heard
        (turns play in order, so the first one that may still play ends the count)."""
        assert self.settled is not None
        while self._undecided:
            turn = self._undecided[0]
            if not turn.interruptible or turn.speaks_until is None or now < turn.speaks_until:
                return
            self._undecided.pop(0)
            self.settled.utterance_ended(turn.id, heard=True)

    def _cut(self, played: str) -> None:
        """`played` is what had been spoken of the assistant's words; it is held against each turn sent
        and not yet decided, so a status is recorded heard only if `played` holds its sentence."""
        assert self.settled is not None
        for turn in self._undecided:
            self.settled.utterance_cut(turn.id, played)
        self._undecided.clear()
        self.settled.interrupted()

    # -- what the app does -------------------------------------------------------------------------

    async def answer_tool(self, name: str, arguments: Any) -> str:
        """The answer to a tool call of the app's model: the adapters' truthful text."""
        if self.settled is None:
            return "Not recorded: the call has not been set up yet. Nothing was sent."
        return await self.settled.answer_tool(name, arguments)

    async def say(self, token: str, *, last: bool = True, **options: Any) -> None:
        """Send text for Twilio to speak (a `text` message; `last` ends the assistant's turn; `options`
        such as `interruptible` go with it). Tokens of one turn make one utterance, which carries
        whatever status the model had been told."""
        turn = self._open
        if self.settled is not None and token and turn is None:
            self._turn_count += 1
            interruptible = options.get("interruptible", self.interruptible) in SPEECH_INTERRUPTS
            turn = self._open = _Turn(f"turn-{self._turn_count}", interruptible)
            self._undecided.append(turn)
            self.settled.utterance_started(turn.id)
        if self.settled is not None and turn is not None:
            turn.text += token
            self.settled.utterance_text(turn.id, token)
        await self.send(json.dumps({"type": "text", "token": token, "last": last, **options}))
        if last and turn is not None:
            self._open = None
            self._sent(turn)

    def _sent(self, turn: _Turn) -> None:
        """The turn's last token is sent: it cannot have played before now, nor before the turns sent
        ahead of it (Twilio speaks them in order), nor faster than the fastest voice."""
        ahead = [t.speaks_until for t in self._undecided if t is not turn and t.speaks_until is not None]
        start = max([time.monotonic(), *ahead])
        turn.speaks_until = start + len(turn.text) * self.fastest_ms_per_char / 1000

    async def end(self, handoff_data: str | None = None) -> None:
        """End the session from the app's side (ConversationRelay's `end`); `closed` follows."""
        message: dict[str, Any] = {"type": "end"}
        if handoff_data is not None:
            message["handoffData"] = handoff_data
        await self.send(json.dumps(message))

    async def closed(self, code: int | None = NORMAL_CLOSURE) -> None:
        """The WebSocket ended: the call ended (`code` 1000: hung up) or was lost (dropped). Whatever
        was still undecided was not heard to its end; the actions go on. Waits until all is sent."""
        if self._reader is not None:
            self._reader.cancel()
        if self.settled is None:
            return
        self._undecided.clear()  # closing cuts whatever was still playing
        self.settled.closed("hangup" if code == NORMAL_CLOSURE else "dropped")
        await self.settled.aclose()
