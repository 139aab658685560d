"""Twilio ConversationRelay: Twilio carries the call and speaks with the app over a WebSocket, sending
the caller's words (`prompt`) and, when the caller cuts in, how much of the assistant's words had been
spoken (`interrupt`, `utteranceUntilInterrupt`); the app answers with text for Twilio to speak.

`SettledConversationRelay` sits on the app's side of that WebSocket, on no package but the light
install's: the app hands it each message it receives (`receive`) and speaks through it (`say`), and
its model's tool calls go through settled (`answer_tool`, the adapters' tool set and truthful text).
`setup` opens the voice channel of conversation `twilio:{callSid}`; the WebSocket's end closes it
(`closed`). What the caller heard follows the adapters' one rule (`SettledChannel`), with the only
signals ConversationRelay gives: an `interrupt` records a status heard only if its sentence had been
spoken in full before the cut (the rest as cut), and the caller's next `prompt` with no `interrupt`
before it says the assistant's turn had played to its end. So speak with interruptible text (the
default): a turn the caller cannot interrupt gives no `interrupt` to say where it was cut.
"""

import json
from collections.abc import Awaitable, Callable
from typing import Any

from settled.adapters.channel import SettledChannel
from settled.adapters.tools import ActionKind, ToolSpec, tool_set

from settled.client import SettledClient

Send = Callable[[str], Awaitable[None]]
# A WebSocket closed normally (1000) is a call that ended; any other close, a call that was lost.
NORMAL_CLOSURE = 1000


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
    ) -> None:
        """`wait_s`: how long a tool call waits for the business system before answering "not
        confirmed yet"; `authorize_on_call`: the tool call itself is the caller's go-ahead (the app's
        model asks before calling); `conversation_prefix`: before the call's `callSid`, the
        conversation's id."""
        self.client = client
        self.kinds = kinds
        self.send = send
        self.wait_s = wait_s
        self.authorize_on_call = authorize_on_call
        self.conversation_prefix = conversation_prefix
        self.settled: SettledChannel | None = None
        self._turns = 0
        self._open: str | None = None  # the turn being sent (until a token with `last`)
        self._unheard: list[str] = []  # turns sent since the caller last spoke: playing, or played

    @property
    def conversation_id(self) -> str | None:
        return self.settled.conversation_id if self.settled is not None else None

    def tools(self) -> list[ToolSpec]:
        """The tools to give the app's model: one per kind, `verify_action`, `authorize_action`."""
        return tool_set(self.kinds, authorize_tool=not self.authorize_on_call and None)

    # -- what Twilio sends -------------------------------------------------------------------------

    async def receive(self, frame: str | bytes | dict[str, Any]) -> dict[str, Any]:
        """Handle one message from ConversationRelay and hand it back, parsed, for the app to act on
        (a `prompt` for its model, a `dtmf`, an `error`)."""
        message: dict[str, Any] = frame if isinstance(frame, dict) else json.loads(frame)
        kind = message.get("type")
        if kind == "setup":
            self._set_up(str(message.get("callSid") or message.get("sessionId") or ""))
        elif self.settled is None:
            return message  # nothing of a call before its setup
        elif kind == "interrupt":
            self._cut(str(message.get("utteranceUntilInterrupt") or ""))
        elif kind == "prompt":
            # The caller spoke after the turns without cutting in: they had played to their end.
            for turn in self._take_turns():
                self.settled.utterance_ended(turn, heard=True)
        return message

    def _take_turns(self) -> list[str]:
        turns, self._unheard, self._open = self._unheard, [], None
        return turns

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

    def _cut(self, played: str) -> None:
        """`played` is what had been spoken of the assistant's words; it is held against each turn not
        yet heard, so a status is recorded heard only if `played` holds its sentence (the safe side)."""
        assert self.settled is not None
        for turn in self._take_turns():
            self.settled.utterance_cut(turn, played)
        self.settled.interrupted()

    # -- what the app does -------------------------------------------------------------------------

    async def answer_tool(self, name: str, arguments: Any) -> str:
        """The answer to a tool call of the app's model: the adapters' truthful text."""
        if self.settled is None:
            return "Not recorded: the call has not been set up yet. Nothing was sent."
        return await self.settled.answer_tool(name, arguments)

    async def say(self, token: str, *, last: bool = True, **options: Any) -> None:
        """Send text for Twilio to speak (a `text` message; `last` ends the assistant's turn). Tokens
        of one turn make one utterance, which carries whatever status the model had been told."""
        if self.settled is not None and token:
            if self._open is None:
                self._turns += 1
                self._open = f"turn-{self._turns}"
                self._unheard.append(self._open)
                self.settled.utterance_started(self._open)
            self.settled.utterance_text(self._open, token)
        if last:
            self._open = None
        await self.send(json.dumps({"type": "text", "token": token, "last": last, **options}))

    async def end(self, handoff_data: str | None = None) -> None:
        """End the session from the app's side (ConversationRelay's `end`); `closed` follows."""
        message: dict[str, Any] = {"type": "end"}
        if handoff_data is not None:
            message["handoffData"] = handoff_data
        await self.send(json.dumps(message))

    async def closed(self, code: int | None = NORMAL_CLOSURE) -> None:
        """The WebSocket ended: the call ended (`code` 1000: hung up) or was lost (dropped). Whatever
        was still playing was not heard to its end; the actions go on. Waits until all is sent."""
        if self.settled is None:
            return
        self._take_turns()  # closing cuts whatever was still playing
        self.settled.closed("hangup" if code == NORMAL_CLOSURE else "dropped")
        await self.settled.aclose()
