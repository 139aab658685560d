"""The conversation routes: channel events, the handoff, and the live stream (docs/reference.md)."""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request
from settled.api.deps import GatewayDep, TenantDep
from settled.api.strict import StrictJsonRoute, valid_path_ids
from settled.gateway.gateway import Gateway
from sse_starlette.sse import EventSourceResponse, ServerSentEvent

from settled.domain.handoff import Handoff
from settled.domain.models import IDENTIFIER_PATTERN, ActionStatus, ConversationEventBody

router = APIRouter(
    prefix="/v1/conversations",
    tags=["conversations"],
    route_class=StrictJsonRoute,
    dependencies=[Depends(valid_path_ids)],
)

ConversationId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="1-128 of A-Z a-z 0-9 . _ : -")]
# How often the stream looks at a conversation that is not running (not started yet, or closed).
STREAM_IDLE_POLL_S = 1.0


@router.post("/{conversation_id}/events", status_code=202)
async def conversation_event(
    conversation_id: ConversationId, body: ConversationEventBody, tenant: TenantDep, gateway: GatewayDep
) -> dict[str, Any]:
    reconciling = await gateway.conversation_event(tenant, conversation_id, body)
    return {"conversation_id": conversation_id, "accepted": body.type, "reconciling": reconciling}


@router.get("/{conversation_id}/handoff", response_model=Handoff)
async def handoff(conversation_id: ConversationId, tenant: TenantDep, gateway: GatewayDep) -> Handoff:
    return await gateway.handoff(tenant, conversation_id)


@router.get("/{conversation_id}/stream")
async def stream(
    conversation_id: ConversationId,
    request: Request,
    tenant: TenantDep,
    gateway: GatewayDep,
    last_event_id: Annotated[str | None, Header(description="resume after this event")] = None,
) -> EventSourceResponse:
    """The current state of every action first, then every change, in order. With `Last-Event-ID`,
    only what came after that event."""
    resume = StreamPosition.parse(last_event_id)
    return EventSourceResponse(_events(gateway, tenant, conversation_id, request, resume), ping=15)


@dataclass(frozen=True)
class StreamPosition:
    """Where a client stands: the number of the last change it was sent of each action of the
    conversation, in the conversation's order (0: none). Ids read `@N1.N2…`; an id that is not one
    of these (an earlier release's, or a stranger's) starts the stream afresh."""

    numbers: tuple[int, ...]

    @classmethod
    def parse(cls, text: str | None) -> "StreamPosition | None":
        if not text or not text.startswith("@"):
            return None
        parts = text[1:].split(".") if len(text) > 1 else []
        if not all(part.isdigit() for part in parts):
            return None
        return cls(tuple(int(part) for part in parts))

    def event_id(self) -> str:
        return "@" + ".".join(str(number) for number in self.numbers)


@dataclass
class _Followed:
    """The actions a connection follows, in the conversation's order, and the number of the last
    change it sent of each."""

    operation_ids: list[str]
    numbers: dict[str, int]

    def position(self) -> StreamPosition:
        return StreamPosition(tuple(self.numbers.get(op, 0) for op in self.operation_ids))


async def _events(
    gateway: Gateway,
    tenant: str | None,
    conversation_id: str,
    request: Request,
    resume: StreamPosition | None,
) -> AsyncIterator[dict[str, str] | ServerSentEvent]:
    """Each action's changes, read from its own history (a long poll each: an idle stream costs
    nothing), merged in the order they are read; the conversation's history is long-polled too, to
    follow each action that joins it."""
    operation_ids = await gateway.conversation_actions(tenant, conversation_id)
    followed = _Followed([], {})
    sent: dict[str, str] = {}  # what this connection last sent of each action: nothing twice
    changes: asyncio.Queue[tuple[str, int, ActionStatus] | None] = asyncio.Queue()
    tasks: list[asyncio.Task[None]] = []

    async def follow(operation_id: str, after: int) -> None:
        async for number, status in gateway.action_changes(tenant, operation_id, after):
            await changes.put((operation_id, number, status))

    def start_following(operation_id: str) -> None:
        after = followed.numbers.get(operation_id, 0)
        tasks.append(asyncio.ensure_future(follow(operation_id, after)))

    async def watch_conversation() -> None:
        async for _ in gateway.conversation_changes(tenant, conversation_id, STREAM_IDLE_POLL_S):
            await changes.put(None)

    def event(operation_id: str, number: int, status: ActionStatus) -> dict[str, str] | None:
        followed.numbers[operation_id] = number
        data = status.model_dump_json()
        if status.conversation_id != conversation_id or sent.get(operation_id) == data:
            return None
        sent[operation_id] = data
        return {"event": "action", "id": followed.position().event_id(), "data": data}

    try:
        if resume is None:
            # The state now: each action's current status and change number, oldest first.
            nows = await asyncio.gather(*(gateway.current_change(tenant, op) for op in operation_ids))
            for operation_id, now in zip(operation_ids, nows, strict=True):
                followed.operation_ids.append(operation_id)
                if now is not None and (item := event(operation_id, *now)) is not None:
                    yield item
            for operation_id in followed.operation_ids:
                start_following(operation_id)
        else:
            for operation_id, number in zip(operation_ids, resume.numbers, strict=False):
                followed.numbers[operation_id] = number
        yield ServerSentEvent(comment="live")  # the client now sees every change after the state above
        tasks.append(asyncio.ensure_future(watch_conversation()))
        while not await request.is_disconnected():
            for operation_id in operation_ids[len(followed.operation_ids) :]:
                followed.operation_ids.append(operation_id)  # an action that joined: all of it
                start_following(operation_id)
            change = await changes.get()
            if change is None:
                operation_ids = await gateway.conversation_actions(tenant, conversation_id)
            elif (item := event(*change)) is not None:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
