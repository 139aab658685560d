"""The channel: one conversation on one channel seen through settled (`SettledChannel`): its tool
calls, its events forwarded in order without blocking the voice loop, and what the caller heard
(presented, heard to its end, or cut). `FollowingBridge` is what the voice frameworks' bridges
build on."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from settled.adapters.answers import check_answer, error_answer, tool_answer
from settled.adapters.tools import (
    AUTHORIZE_TOOL,
    CHECK_TOOL,
    ActionKind,
    OperationIds,
    ToolSpec,
    derived_operation_id,
    earlier_operation_id,
    tool_set,
)

from settled.client import SettledAPIError, SettledClient, SettledError, is_final
from settled.domain.models import ActionStatus, Channel
from settled.domain.states import State

log = logging.getLogger("settled.adapters")

# Derived ids of one request that met a definite "not done" (failed, cancelled) move on to the
# next suffix, so asking again sends it again; this bounds how often.
MAX_REQUEST_ROUNDS = 20


def _words(text: str) -> str:
    return " ".join(text.casefold().split())


def carries(text: str, status: ActionStatus) -> bool:
    """Whether an utterance's text carries this status: it contains the status's sentence, its
    business reference or its operation id. A filler ("one moment") or a holding line carries none."""
    spoken = _words(text)
    marks = (status.say, status.business_ref or "", status.operation_id)
    return any(mark.strip() and _words(mark) in spoken for mark in marks)


@dataclass
class _Utterance:
    # The statuses the model had been handed when it generated this utterance: only these can be
    # what it says (a line generated before a result arrived cannot present that result).
    could_carry: list[ActionStatus]
    text: str = ""
    # Its own playback's verdict, once given: heard to its end (True) or cut (False).
    heard: bool | None = None
    # Some of its text may be another utterance's (an adapter could not tell): it is never heard.
    in_doubt: bool = False
    # The operation ids already recorded from it: each is recorded once, by its first verdict.
    recorded: set[str] = field(default_factory=set)


# How many ended utterances are kept for their late text (a transcription that trails the audio).
KEPT_ENDED = 32


@dataclass
class SettledChannel:
    """One conversation on one channel, seen through settled.

    Tools call `request`, `check` and `authorize` and await them (the model needs the answer).
    Channel events (`opened`, `interrupted`, `closed`, and what the caller heard) are queued and
    sent in order by one background task, so a slow or unreachable API never stalls the
    framework's audio loop; `flush()` waits for them.

    What the caller heard, the one rule every adapter maps its framework's events to: heard is
    ordered evidence. A status counts as presented only by an utterance that carries it (generated
    after the model was handed that status, and containing its sentence, business reference or
    operation id), and only as completed on a signal that belongs to that utterance and comes after
    its own playback: its audio's end on the caller's side (`utterance_ended(..., heard=True)`), or
    the platform's report of what was spoken of it before a cut (`utterance_cut`). Generation
    finishing is not it (audio is generated faster than it plays), nor are the caller's words, a
    prompt, a transcription or a turn's end that arrive late, out of order or belong to another
    utterance: an adapter passes only its own utterance's signals, and each utterance's text only
    as its own (`utterance_text`, which may trail its playback: a late transcription still joins
    the utterance it belongs to, never a later one). A barge-in, or the end of the session, while
    an utterance plays records it as not completed; an utterance that carries nothing records
    nothing; each status is recorded once per utterance, by the verdict its playback gave. Where
    the evidence is missing or in doubt, the safe side is "not completed": a repeat is better than
    a loss.
    """

    client: SettledClient
    conversation_id: str
    kinds: list[ActionKind]
    channel: Channel = "voice"
    # How long a tool call waits for the business system's answer before telling the model
    # "not confirmed yet" (the API's `?wait`, at most 30 s). A voice turn should not stall long.
    wait_s: float = 2.0
    # True when the tool call itself is the caller's go-ahead (the agent asks before calling).
    authorize_on_call: bool = False
    operation_ids: OperationIds = derived_operation_id
    operations: list[str] = field(default_factory=list)
    _by_tool: dict[str, ActionKind] = field(default_factory=dict, init=False)
    _queue: asyncio.Queue[Callable[[], Awaitable[None]] | None] | None = field(default=None, init=False)
    _sender: asyncio.Task[None] | None = field(default=None, init=False)
    # (when, status): every status the model was handed, oldest first.
    _told: list[tuple[float, ActionStatus]] = field(default_factory=list, init=False)
    _playing: dict[str, _Utterance] = field(default_factory=dict, init=False)
    # Ended utterances stay ended: a late event of one already heard must not reopen (and cut) it;
    # the last few are kept (oldest first) so that their late text still joins them.
    _ended: dict[str, _Utterance | None] = field(default_factory=dict, init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._by_tool = {kind.name: kind for kind in self.kinds}
        if len(self._by_tool) != len(self.kinds):
            raise ValueError("two kinds share a tool name; give one a tool_name")

    # -- tools -----------------------------------------------------------------------------------

    @property
    def needs_authorize_tool(self) -> bool:
        return not self.authorize_on_call and any(kind.requires_authorization for kind in self.kinds)

    def kind_for(self, tool_name: str) -> ActionKind:
        return self._by_tool[tool_name]

    async def request(self, tool_name: str, params: dict[str, Any]) -> ActionStatus:
        """Create (or meet again) the durable action for this tool call; wait briefly for its outcome."""
        kind = self._by_tool[tool_name]
        authorized = self.authorize_on_call or not kind.requires_authorization
        status: ActionStatus | None = None
        for round_ in range(1, MAX_REQUEST_ROUNDS + 1):
            operation_id = await self._operation_id(kind.kind, params, round_)
            created = await self.client.create_action(
                self.conversation_id,
                kind.kind,
                params,
                operation_id=operation_id,
                authorized=authorized,
                authorized_by=f"{self.channel} tool call" if authorized else None,
                # Nothing is sent before the go-ahead, so there is nothing to wait for.
                wait=self.wait_s if authorized else None,
            )
            status = created
            # A repeat of a request that definitely did not happen is a new request.
            if created.created or created.state not in (State.FAILED, State.CANCELLED):
                break
        assert status is not None
        if status.operation_id not in self.operations:
            self.operations.append(status.operation_id)
        return status

    async def _operation_id(self, kind: str, params: dict[str, Any], round_: int) -> str:
        """The derived id, or the earlier derivation's where that one names this request's action (one
        created before params were compared as values): a request asked again after an upgrade meets
        the action it started. The ids differ only for params with floats or text not in NFC."""
        operation_id = self.operation_ids(self.conversation_id, kind, params, round_)
        if self.operation_ids is not derived_operation_id:
            return operation_id
        earlier = earlier_operation_id(self.conversation_id, kind, params, round_)
        if earlier == operation_id:
            return operation_id
        try:
            found = await self.client.get(earlier)
        except SettledAPIError as error:
            if error.code == "not_found":
                return operation_id
            raise
        mine = found.conversation_id == self.conversation_id and found.kind == kind
        return earlier if mine else operation_id

    async def answer_request(self, tool_name: str, params: dict[str, Any]) -> str:
        try:
            status = await self.request(tool_name, params)
        except SettledError as error:
            log.warning("request not recorded: %s", error.code)
            return error_answer(error)
        self.told(status)
        return tool_answer(status, AUTHORIZE_TOOL if self.needs_authorize_tool else None)

    async def answer_tool(self, tool_name: str, arguments: Any) -> str:
        """The answer to any tool of the set (`tool_set`), called by name with its arguments, for an
        edge that receives tool calls as data: what is wrong with a call (an unknown tool, arguments
        that are not a JSON object) is said in the answer, never raised."""
        if not isinstance(arguments, dict):
            return "Not recorded: the arguments are not a JSON object. Nothing was sent."
        operation_id = arguments.get("operation_id")
        operation_id = operation_id if isinstance(operation_id, str) and operation_id else None
        if tool_name == CHECK_TOOL:
            return await self.answer_check(operation_id)
        if tool_name == AUTHORIZE_TOOL and self.needs_authorize_tool:
            if operation_id is None:
                return "Not authorized: operation_id is required (the op_... of the request)."
            return await self.answer_authorize(operation_id)
        if tool_name in self._by_tool:
            return await self.answer_request(tool_name, arguments)
        known = [spec.name for spec in tool_set(self.kinds, self.needs_authorize_tool)]
        tools = ", ".join(known)
        return f"Not recorded: there is no tool {tool_name!r} (the tools: {tools}). Nothing was sent."

    async def _own(self, operation_id: str) -> None:
        """Raises `not_found` unless the action is this conversation's: a model may be handed any id,
        and another conversation's action is not read on nor acted on here, as the API answers a
        conversation token (the same error, nothing of that action)."""
        found = await self.client.get(operation_id)
        if found.conversation_id != self.conversation_id:
            raise SettledAPIError("not_found", "no such operation or conversation", 404)

    async def authorize(self, operation_id: str) -> ActionStatus:
        await self._own(operation_id)
        return await self.client.authorize(operation_id, by=f"{self.channel} caller", wait=self.wait_s)

    async def answer_authorize(self, operation_id: str) -> str:
        try:
            status = await self.authorize(operation_id)
        except SettledError as error:
            if isinstance(error, SettledAPIError) and error.code == "not_found":
                return f"There is no request {operation_id} in this conversation. Nothing was authorized."
            return error_answer(error)
        self.told(status)
        return tool_answer(status)

    async def check(self, operation_id: str | None = None) -> list[ActionStatus]:
        """What a "did you do it?" tells of, after checking the business system now: the one request,
        or every request of the conversation, oldest first (raises `SettledError`)."""
        if operation_id:
            await self._own(operation_id)
            return [(await self.client.what_may_i_say(operation_id, wait=self.wait_s)).action]
        everything = await self.client.what_may_i_say_in(self.conversation_id, wait=self.wait_s)
        return [verdict.action for verdict in everything.actions]

    async def answer_check(self, operation_id: str | None = None) -> str:
        """The "did you do it?" answer, after checking the business system now."""
        try:
            statuses = await self.check(operation_id)
        except SettledError as error:
            if isinstance(error, SettledAPIError) and error.code == "not_found":
                return f"There is no request {operation_id} in this conversation."
            return f"Could not check right now ({error.code}). Do not say anything is done."
        for status in statuses:
            self.told(status)
        return check_answer(statuses)

    # -- channel events --------------------------------------------------------------------------

    def opened(self) -> None:
        self._post(lambda: self._event("channel_opened"))

    def interrupted(self) -> None:
        """The caller cut in: settled checks what may be in flight (nothing is cancelled)."""
        self._post(lambda: self._event("interrupted"))

    def closed(self, reason: str = "hangup") -> None:
        """The channel ended; the actions go on (ending a call never cancels one). Whatever was
        still playing was not heard to its end, and is recorded so before the close."""
        if self._closed:
            return
        self.cut_off()
        self._closed = True
        self._post(lambda: self._event("channel_closed", reason))

    async def _event(self, type_: str, reason: str | None = None) -> None:
        await self.client.conversation_event(self.conversation_id, type_, self.channel, reason)  # type: ignore[arg-type]

    # -- what the caller heard --------------------------------------------------------------------

    def told(self, status: ActionStatus) -> None:
        """The model was handed this status: utterances it generates from now on may carry it."""
        self._told.append((time.time(), status))

    def _known_at(self, at: float) -> list[ActionStatus]:
        latest: dict[str, ActionStatus] = {}
        for when, status in self._told:
            if when <= at:
                latest[status.operation_id] = status
        return list(latest.values())

    def utterance_started(self, utterance_id: str, generated_at: float | None = None) -> None:
        """The model began generating an utterance (`generated_at`: when, as a `time.time()`, for a
        framework that reports it afterwards). Nothing is recorded until it ends."""
        if self._closed or utterance_id in self._playing or utterance_id in self._ended:
            return
        could_carry = self._known_at(time.time() if generated_at is None else generated_at)
        if could_carry:
            self._playing[utterance_id] = _Utterance(could_carry)

    def utterance_text(self, utterance_id: str, text: str, *, in_doubt: bool = False) -> None:
        """Text of this utterance, while it plays or after its playback ended (a transcription that
        trails the audio): it joins this utterance's verdict, never another's. `in_doubt`: the adapter
        cannot tell that the text is this utterance's alone; the utterance then never counts as
        heard (what it carries is recorded as cut)."""
        utterance = self._playing.get(utterance_id) or self._ended.get(utterance_id)
        if utterance is None:
            return
        utterance.text += text
        utterance.in_doubt = utterance.in_doubt or in_doubt
        if utterance.heard is not None:
            self._record(utterance, utterance.text.strip(), utterance.heard)

    def utterance_ended(self, utterance_id: str, heard: bool, text: str | None = None) -> None:
        """The utterance's own playback says its audio played to its end on the caller's side
        (`heard`) or was cut off. `text`, when given, is its whole text."""
        utterance = self._end(utterance_id)
        if utterance is None:
            return
        if text is not None:
            utterance.text = text
        utterance.heard = heard
        self._record(utterance, utterance.text.strip(), heard)

    def utterance_cut(self, utterance_id: str, played: str) -> None:
        """The caller cut in after `played`, the platform's report of what had been spoken of this
        utterance: a status is heard only if its sentence was spoken in full before the cut; one the
        rest of the utterance carried is recorded as cut."""
        utterance = self._end(utterance_id)
        if utterance is None:
            return
        utterance.heard = False
        whole, played = utterance.text.strip(), played.strip()
        for status in utterance.could_carry:
            if status.say.strip() and _words(status.say) in _words(played):
                utterance.recorded.add(status.operation_id)
                self._post(lambda s=status: self._present(s, played, True))
        self._record(utterance, whole, False)

    def _end(self, utterance_id: str) -> _Utterance | None:
        utterance = self._playing.pop(utterance_id, None)
        if utterance_id in self._ended:
            return None
        self._ended[utterance_id] = utterance
        while len(self._ended) > KEPT_ENDED:
            del self._ended[next(iter(self._ended))]
        return utterance

    def _record(self, utterance: _Utterance, spoken: str, heard: bool) -> None:
        heard = heard and not utterance.in_doubt
        for status in utterance.could_carry:
            if status.operation_id not in utterance.recorded and carries(spoken, status):
                utterance.recorded.add(status.operation_id)
                self._post(lambda s=status: self._present(s, spoken, heard))

    def utterance(self, utterance_id: str, text: str, heard: bool, generated_at: float) -> None:
        """A whole utterance at once, for a framework that reports text and playback together."""
        self.utterance_started(utterance_id, generated_at)
        self.utterance_ended(utterance_id, heard, text)

    @property
    def playing(self) -> list[str]:
        """The utterances that may carry a status and have not ended yet, oldest first."""
        return list(self._playing)

    def cut_off(self) -> bool:
        """Every utterance still playing (or queued to play) ends unheard; whether there was one."""
        cut = self.playing
        for utterance_id in cut:
            self.utterance_ended(utterance_id, heard=False)
        return bool(cut)

    async def _present(self, status: ActionStatus, text: str, completed: bool) -> None:
        # `for_state`: this text presented the state the model was told, even if the action has
        # moved on since; settled then still owes the newer outcome to the next channel.
        op, state = status.operation_id, status.state
        await self.client.presented(op, self.channel, text, completed, for_state=state)

    # -- the sender ------------------------------------------------------------------------------

    def _post(self, send: Callable[[], Awaitable[None]]) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_all(self._queue))
        self._queue.put_nowait(send)

    async def _send_all(self, queue: asyncio.Queue[Callable[[], Awaitable[None]] | None]) -> None:
        while True:
            send = await queue.get()
            try:
                if send is None:
                    return
                await send()
            except SettledError as error:
                # The action is durable either way; only this channel's note is lost.
                log.warning("channel event not recorded: %s %s", error.code, error.message)
            except Exception:
                log.exception("channel event not recorded")
            finally:
                queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued channel event has been sent."""
        if self._queue is not None and self._sender is not None and not self._sender.done():
            await self._queue.join()

    async def aclose(self) -> None:
        await self.flush()
        if self._queue is not None and self._sender is not None and not self._sender.done():
            self._queue.put_nowait(None)
            await self._sender


class Bridge:
    """What every framework's bridge holds: one conversation's `SettledChannel`."""

    def __init__(
        self,
        client: SettledClient,
        conversation_id: str,
        kinds: list[ActionKind],
        *,
        channel: Channel = "voice",
        wait_s: float = 2.0,
        authorize_on_call: bool = False,
    ) -> None:
        """`wait_s`: how long a call waits for the business system before answering "not confirmed
        yet"; `authorize_on_call`: the tool call itself is the caller's go-ahead."""
        self.settled = SettledChannel(
            client,
            conversation_id,
            kinds,
            channel=channel,
            wait_s=wait_s,
            authorize_on_call=authorize_on_call,
        )
        self.client = client

    def closed(self, reason: str = "hangup") -> None:
        self.settled.closed(reason)

    async def aclose(self) -> None:
        await self.settled.aclose()


class FollowingBridge(Bridge):
    """What the Pipecat and LiveKit bridges share: the tool set to map, and a tool call that keeps
    watching after its first answer, to report the outcome when it comes."""

    def __init__(self, *args: Any, follow_s: float = 30.0, **kwargs: Any) -> None:
        """`follow_s`: how long a call keeps watching after its first answer (0: not at all); the
        rest as `Bridge`'s."""
        super().__init__(*args, **kwargs)
        self.follow_s = follow_s

    def tool_specs(self) -> list[ToolSpec]:
        """The tool set this bridge offers, to be mapped onto the framework's own tool type."""
        return tool_set(self.settled.kinds, self.settled.needs_authorize_tool)

    async def answer_following(
        self, call: Awaitable[ActionStatus], not_final: Callable[[str], Awaitable[None]]
    ) -> str:
        """A request's or a go-ahead's answer: the verified state now; if it is still moving, that is
        handed to the model at once through `not_final` (the framework's interim result, so the caller
        hears "not confirmed yet" instead of silence), and the outcome is the answer once it comes."""
        try:
            status = await call
        except SettledError as error:
            return error_answer(error)
        authorize_tool = AUTHORIZE_TOOL if self.settled.needs_authorize_tool else None
        self.settled.told(status)
        waiting_for_user = status.state is State.REQUESTED and not status.authorized
        if is_final(status) or waiting_for_user or self.follow_s <= 0:
            return tool_answer(status, authorize_tool)
        await not_final(tool_answer(status, authorize_tool))
        try:
            final = await self.client.await_settled(status.operation_id, self.follow_s)
        except SettledError as error:
            return f"Could not follow the request ({error.code}); it goes on. Do not say it is done."
        self.settled.told(final)
        return tool_answer(final, authorize_tool)
