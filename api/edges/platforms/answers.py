"""What a hosted platform's webhook asks of settled, answered as an adapter would: tool calls through
the adapters' own `SettledChannel`, concurrently and within the platform's wait, and the voice
channel's opening and closing, each sent once however often the platform delivers it."""

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from settled.adapters.common import SettledChannel, error_answer
from settled.api.edges.inprocess import edge_client, offered_kinds
from settled.api.errors import error_response

from settled.client import SettledError
from settled.domain.canonical import is_text

log = logging.getLogger("settled.api.edges.platforms")

# Part of the wait kept for the answer's way back (the in-process call, the JSON), so the whole
# answer is sent within the wait; at most this much, and at most a quarter of the wait.
RETURN_MARGIN_S = 1.0
# What the answers still need once the wait ends: writing them out.
WRITE_S = 0.05
# A call still unanswered when the wait ends keeps going here, so its action is recorded all the
# same (the model's next call with the same details meets it); referenced until it ends.
_left_running: set["asyncio.Task[str]"] = set()


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a webhook: the tool's name and its arguments (anything: the channel says what
    is wrong with arguments that are not a JSON object)."""

    name: str
    arguments: Any


def worth_a_retry(error: SettledError) -> bool:
    """Whether the platform's retry may succeed where this try failed (settled unreachable, busy):
    answered with an error, so it comes. Anything else would fail the same way again."""
    return error.status is None or error.status >= 500 or error.status == 429


def unanswered() -> str:
    return error_answer(SettledError("timeout", "no answer within the wait"))


async def answer_calls(
    app: FastAPI, api_key: str | None, conversation_id: str, calls: Sequence[ToolCall], wait_s: float
) -> list[str]:
    """Each call's answer, in the calls' order: the adapters' truthful text, all within `wait_s`. The
    calls run concurrently; one still running when the wait ends answers that it could not be
    confirmed (and that asking again is safe), and goes on to record its action."""
    kinds = offered_kinds(app)
    api_wait_s = max(0.0, wait_s - min(RETURN_MARGIN_S, wait_s / 4))

    async def answer(call: ToolCall) -> str:
        async with edge_client(app, api_key) as client:
            channel = SettledChannel(client, conversation_id, kinds, channel="voice", wait_s=api_wait_s)
            return await channel.answer_tool(call.name, call.arguments)

    tasks = [asyncio.ensure_future(answer(call)) for call in calls]
    if not tasks:
        return []
    await asyncio.wait(tasks, timeout=wait_s - WRITE_S)
    answers = []
    for task in tasks:
        if not task.done():
            _left_running.add(task)
            task.add_done_callback(_ended)
            answers.append(unanswered())
        elif task.exception() is not None:
            log.error("a tool call failed: %r", task.exception())
            answers.append(unanswered())
        else:
            answers.append(task.result())
    return answers


def _ended(task: "asyncio.Task[str]") -> None:
    _left_running.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("a tool call failed after its wait: %r", task.exception())


EventType = Literal["channel_opened", "channel_closed"]


@dataclass
class ChannelEvents:
    """Opens and closes a conversation's voice channel once, however often (and however concurrently)
    a platform delivers the call's start or end: one at a time per conversation, each sent only when
    the conversation's own record says the channel is not there yet (an end delivered twice, or a
    start delivered after the end, changes nothing)."""

    _locks: dict[tuple[str | None, str], asyncio.Lock] = field(default_factory=dict)
    _waiting: dict[tuple[str | None, str], int] = field(default_factory=dict)

    async def send_once(
        self,
        app: FastAPI,
        tenant: str | None,
        api_key: str | None,
        conversation_id: str,
        type_: EventType,
        reason: str | None = None,
    ) -> bool:
        """Whether it was sent (False: the channel already was so). Raises SettledError when settled
        cannot be asked, so the platform's retry comes."""
        async with self._one_at_a_time((tenant, conversation_id)), edge_client(app, api_key) as client:
            voice = (await client.handoff(conversation_id)).channels.voice
            if (type_ == "channel_opened" and voice != "unused") or (
                type_ == "channel_closed" and voice == "closed"
            ):
                return False
            await client.conversation_event(conversation_id, type_, "voice", reason and reason[:200])
            return True

    @asynccontextmanager
    async def _one_at_a_time(self, key: tuple[str | None, str]) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:  # nobody else wants it: forget it
                del self._waiting[key], self._locks[key]


def _channel_events(app: FastAPI) -> ChannelEvents:
    """The app's one `ChannelEvents`, made when first needed."""
    events: ChannelEvents | None = getattr(app.state, "platform_channel_events", None)
    if events is None:
        events = app.state.platform_channel_events = ChannelEvents()
    return events


async def record_channel_event(
    app: FastAPI,
    tenant: str | None,
    api_key: str | None,
    conversation_id: str,
    type_: EventType,
    reason: object,
) -> JSONResponse | None:
    """Open or close the conversation's voice channel, once (`ChannelEvents`). The error answer when
    settled cannot record it now, so that the platform's retry comes (any answer but a 2xx brings
    it); None otherwise: recorded, already so, or never recordable (logged)."""
    try:
        await _channel_events(app).send_once(
            app,
            tenant,
            api_key,
            conversation_id,
            type_,
            # A reason that is no Unicode text is dropped, not let refuse the event itself.
            reason if isinstance(reason, str) and reason and is_text(reason) else None,
        )
    except SettledError as error:
        if worth_a_retry(error):
            return error_response(error.status or 503, error.code, f"{type_} could not be recorded now")
        log.warning("%s of %s was not recorded: %s", type_, conversation_id, error.code)
    return None
