"""settled under Google's Agent Development Kit, for Gemini Live (`pip install 'settled[google-adk]'`).

In a live (bidirectional) ADK run the model keeps talking while a tool works: a call may be
non-blocking (`types.Behavior.NON_BLOCKING`), its answer scheduled to reach the model silently, when
it is idle or by interrupting it; a caller who says "stop" reaches the model while the request is at
the business system, and the model, knowing nothing of it, may say "I've cancelled it" as it goes
through. At the end of the run ADK cancels every call still running, wherever its request is. With
this bridge each tool call records a durable action instead, and the model is only ever handed the
verified state: nothing it hears says done before settled confirmed it.

    bridge = SettledLive(client, conversation_id, await action_kinds(client, ["refund"]), non_blocking=True)
    agent = Agent(name="support", model=..., instruction=..., tools=bridge.tools())
    events = runner.run_live(user_id=..., session_id=..., live_request_queue=queue, run_config=...)
    async for event in bridge.watch(events):
        ...  # your audio output, as before; once a chunk of the model's audio has played:
        # bridge.played(chunk)

Blocking calls (the default) wait up to `wait_s` for the business system, then answer with the
verified state ("not confirmed yet" when it has not answered). Non-blocking calls
(`non_blocking=True`) let the conversation go on: the answer comes once the action is final, or
after `follow_s` as "not confirmed yet", with the `scheduling` given (by default `WHEN_IDLE`: the
model tells the caller when it is free, without cutting anyone off). `verify_action` stays blocking:
"did you do it?" wants its answer now, from the business system. The answer is the same verified
state under any scheduling; `SILENT` only means the model is not asked to speak of it, and settled
then still owes the outcome to the next channel.

What the caller heard: a model turn's audio, played by your audio output. ADK yields the audio as it
is generated, much faster than it plays, so `turn_complete` is not "heard". A turn counts as heard
when its generation completed and your output reported (`bridge.played`) all of its audio as played;
turns play in order. An `interrupted` event (a barge-in: the output must drop what it has not played,
as Gemini Live asks of a client) cuts every turn not fully played, and so does the end of the run.
A turn without audio (text output) is never heard to its end, only cut: a repeat, never a loss.
What a turn said is its output transcription, which Gemini orders with itself but not with the audio:
it may arrive after its turn ended, even after a barge-in. Each piece is bound to the oldest turn
whose transcription has not caught up with its audio, whatever came between; a `finished` piece
completes that turn's text (it repeats the pieces since the last one); a piece that arrives once a
newer turn has begun is in doubt, and its turn is then never recorded as heard. A turn's evidence is
never handed to another turn.

`watch` forwards the run to settled: an `interrupted` while a turn still played or a request of ours
ran as `interrupted`, each turn that spoke a result as `presented` (completed only when played to its
end), and the end of the run as `channel_closed` (`hangup` when the run ends, as it does when you close
the `LiveRequestQueue`; `dropped` when it fails), after recording whatever still played as cut.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

try:
    from google.adk.events import Event
    from google.adk.tools import BaseTool, ToolContext
    from google.genai import types
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError(
        "adapters.google_adk needs Google's Agent Development Kit: pip install 'settled[google-adk]'"
    ) from error

from settled.adapters.answers import error_answer, tool_answer
from settled.adapters.channel import FollowingBridge
from settled.adapters.tools import AUTHORIZE_TOOL, CHECK_TOOL, ToolSpec

from settled.client import SettledError, is_final
from settled.domain.models import ActionStatus
from settled.domain.states import State


class SettledTool(BaseTool):
    """One tool of the adapters' tool set as an ADK tool: declared with the set's JSON Schema, its
    call answered by the bridge from verified state."""

    def __init__(
        self,
        bridge: "SettledLive",
        spec: ToolSpec,
        behavior: types.Behavior | None = None,
        scheduling: types.FunctionResponseScheduling | None = None,
    ) -> None:
        super().__init__(
            name=spec.name, description=spec.description, behavior=behavior, response_scheduling=scheduling
        )
        self._bridge = bridge
        self._parameters = spec.parameters

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self._parameters
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> str:
        return await self._bridge.answer(self.name, args)


@dataclass
class _Turn:
    """One model turn on its way to the caller's ear."""

    id: str
    generated: int = 0  # bytes of audio ADK yielded for it
    played: int = 0  # bytes of it the audio output reported as played
    complete: bool = False  # `turn_complete`: no more audio will come for it
    closed: bool = False  # `turn_complete` or `interrupted`: nothing more is generated for it
    ended: bool = False  # its verdict (heard, or cut) was given
    # Its transcription has caught up with its audio: a `finished` piece came after its last audio.
    caught_up: bool = False
    segment: str = ""  # the transcription pieces since its last `finished` one

    @property
    def played_out(self) -> bool:
        return self.complete and self.generated > 0 and self.played >= self.generated


class SettledLive(FollowingBridge):
    """One live ADK run (one conversation) bound to settled."""

    def __init__(
        self,
        *args: Any,
        non_blocking: bool = False,
        scheduling: types.FunctionResponseScheduling = types.FunctionResponseScheduling.WHEN_IDLE,
        **kwargs: Any,
    ) -> None:
        """`FollowingBridge`'s arguments, and `non_blocking`: the kinds' tools and `authorize_action`
        run beside the conversation, their answer (the outcome, or "not confirmed yet" after
        `follow_s`) delivered with `scheduling`."""
        super().__init__(*args, **kwargs)
        self.non_blocking = non_blocking
        self.scheduling = scheduling
        self._turns: list[_Turn] = []  # oldest first: they play in this order
        self._turn_count = 0
        self._calls_running = 0

    # -- tools -----------------------------------------------------------------------------------

    def tools(self) -> list[SettledTool]:
        """One tool per kind, `verify_action`, and `authorize_action` when a kind needs a go-ahead."""
        tools = []
        for spec in self.tool_specs():
            if self.non_blocking and spec.name != CHECK_TOOL:
                tools.append(SettledTool(self, spec, types.Behavior.NON_BLOCKING, self.scheduling))
            else:
                tools.append(SettledTool(self, spec))
        return tools

    async def answer(self, tool_name: str, arguments: Any) -> str:
        """The answer to one call of the tool set, from verified state."""
        self._calls_running += 1
        try:
            if not self.non_blocking or tool_name == CHECK_TOOL or not isinstance(arguments, dict):
                return await self.settled.answer_tool(tool_name, arguments)
            return await self._answer_when_settled(tool_name, arguments)
        finally:
            self._calls_running -= 1

    async def _answer_when_settled(self, tool_name: str, arguments: dict[str, Any]) -> str:
        """A non-blocking call: the model is not waiting, so the answer waits for the outcome (up to
        `follow_s`); what it says is verified state either way."""
        operation_id = arguments.get("operation_id")
        if tool_name == AUTHORIZE_TOOL and isinstance(operation_id, str) and operation_id:
            act = self.settled.authorize(operation_id)
        elif tool_name in {kind.name for kind in self.settled.kinds}:
            act = self.settled.request(tool_name, arguments)
        else:
            return await self.settled.answer_tool(tool_name, arguments)
        try:
            status = await act
        except SettledError as error:
            return error_answer(error)
        self.settled.told(status)
        status = await self._followed(status)
        return tool_answer(status, AUTHORIZE_TOOL if self.settled.needs_authorize_tool else None)

    async def _followed(self, status: ActionStatus) -> ActionStatus:
        waiting_for_user = status.state is State.REQUESTED and not status.authorized
        if is_final(status) or waiting_for_user or self.follow_s <= 0:
            return status
        try:
            final = await self.client.await_settled(status.operation_id, self.follow_s)
        except SettledError:
            return status  # still true: not confirmed yet
        self.settled.told(final)
        return final

    # -- events ----------------------------------------------------------------------------------

    async def watch(
        self, events: AsyncIterator[Event], *, closed_reason: str = "hangup"
    ) -> AsyncIterator[Event]:
        """The run's events (`runner.run_live(...)`), unchanged, each forwarded to settled on the way."""
        self.settled.opened()
        try:
            async for event in events:
                self.handle(event)
                yield event
        except Exception:
            self.closed("dropped")
            raise
        finally:
            self.closed(closed_reason)
            await self.settled.flush()

    def handle(self, event: Event) -> None:
        """Forward one event of the run (for apps that read the run themselves)."""
        if event.author != "user":
            if event.output_transcription is not None:
                self._transcribed(event.output_transcription)
            for part in (event.content.parts or []) if event.content else []:
                if part.inline_data is not None and part.inline_data.data:
                    turn = self._speaking()
                    turn.generated += len(part.inline_data.data)
                    turn.caught_up = False
                elif part.text and not part.thought and not event.output_transcription:
                    self.settled.utterance_text(self._speaking().id, part.text)  # text output
        if event.interrupted:
            self._barge_in()
        elif event.turn_complete and self._turns and not self._turns[-1].closed:
            self._turns[-1].complete = self._turns[-1].closed = True
            self._heard_if_played_out()

    def played(self, audio: bytes) -> None:
        """Your audio output played this chunk of the model's audio to the caller (in order)."""
        left = len(audio)
        for turn in self._turns:
            if turn.ended:
                continue  # heard, or cut: its unplayed audio was dropped
            take = min(left, turn.generated - turn.played)
            turn.played += take
            left -= take
        self._heard_if_played_out()

    def _speaking(self) -> _Turn:
        """The turn the model's content belongs to: the one being generated, or a new one."""
        if not self._turns or self._turns[-1].closed:
            return self._new_turn()
        return self._turns[-1]

    def _new_turn(self) -> _Turn:
        self._turn_count += 1
        turn = _Turn(f"turn-{self._turn_count}")
        self._turns.append(turn)
        self.settled.utterance_started(turn.id)
        # Turns whose verdict is given and whose transcription caught up have nothing more to come.
        self._turns = [t for t in self._turns if not (t.ended and t.caught_up)]
        return turn

    def _transcribed(self, transcription: types.Transcription) -> None:
        """A piece of output transcription, bound to the turn it belongs to. Transcription is ordered
        with itself but not with the audio: it may trail its turn's end, even a barge-in. So it belongs
        to the oldest turn whose transcription has not caught up with its audio (else to the turn being
        generated, else it begins one). A piece that comes once a newer turn has begun cannot be told
        from that turn's own words: in doubt, it never proves its turn heard. A `finished` piece
        repeats the pieces since the last one (ADK flushes at generation and turn end): it completes
        the turn's text, never replaces it."""
        turn = next((t for t in self._turns if not t.caught_up), None)
        if turn is None:
            turn = self._speaking()
        in_doubt = turn is not self._turns[-1]
        text = transcription.text or ""
        if transcription.finished:
            if not turn.segment and text:
                self.settled.utterance_text(turn.id, text, in_doubt=in_doubt)
            turn.segment = ""
            turn.caught_up = True
        elif text:
            turn.segment += text
            self.settled.utterance_text(turn.id, text, in_doubt=in_doubt)

    def _heard_if_played_out(self) -> None:
        for turn in self._turns:
            if turn.ended:
                continue
            if not turn.played_out:
                return  # turns play in order
            turn.ended = True
            self.settled.utterance_ended(turn.id, heard=True)

    def _barge_in(self) -> None:
        # The output drops all it has not played. Gemini also reports an interruption when the caller
        # speaks after the audio ended: that cuts nothing, and matters only while a request runs.
        if any(not turn.ended for turn in self._turns) or self._calls_running:
            self.settled.interrupted()
        self._cut_every_turn()

    def _cut_every_turn(self) -> None:
        for turn in self._turns:
            turn.closed = True
            if not turn.ended:
                turn.ended = True
                self.settled.utterance_ended(turn.id, heard=False)

    def closed(self, reason: str = "hangup") -> None:
        self._cut_every_turn()
        self.settled.closed(reason)

    async def aclose(self) -> None:
        await self.settled.aclose()
