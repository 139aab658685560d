"""The conversation routes: channel events, the handoff, and the live stream (docs/reference.md)."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request
from settled.api.deps import GatewayDep, TenantDep
from settled.api.strict import StrictJsonRoute, valid_path_ids
from settled.workflows.messages import ChannelEvent, EventsSince
from sse_starlette.sse import EventSourceResponse, ServerSentEvent

from settled.gateway import Gateway
from settled.handoff import Handoff
from settled.models import IDENTIFIER_PATTERN, ConversationEventBody

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
    event = ChannelEvent(type=body.type, channel=body.channel, reason=body.reason)
    reconciling = await gateway.conversation_event(tenant, conversation_id, event)
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
    """Where a client stands: after change `seq` of the conversation's log, or, inside the opening
    snapshot taken at `seq`, after its `index`-th action. Ids are `SEQ` or `SEQ.INDEX`."""

    seq: int
    index: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> "StreamPosition | None":
        if not text:
            return None
        seq, _, index = text.strip().partition(".")
        if not seq.isdigit() or (index and not index.isdigit()):
            return None  # not one of ours: start afresh
        return cls(int(seq), int(index) if index else None)

    def event_id(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"


def _starting_point(resume: StreamPosition | None, head: EventsSince | None) -> StreamPosition:
    """Where this connection starts: after the client's last change when the log still holds what
    came after it (index None: no snapshot); otherwise a snapshot at the head, or the rest of the
    snapshot the client was reading."""
    current = head.seq if head else 0
    if resume is None or resume.seq > current:
        return StreamPosition(current, 0)  # a new client (or an id from another conversation)
    if resume.index is not None:
        return resume
    if head is not None and head.truncated:
        return StreamPosition(current, 0)  # the bounded log lost its place: the state instead
    return resume


def _event(position: StreamPosition, data: str) -> dict[str, str]:
    return {"event": "action", "id": position.event_id(), "data": data}


async def _events(
    gateway: Gateway,
    tenant: str | None,
    conversation_id: str,
    request: Request,
    resume: StreamPosition | None,
) -> AsyncIterator[dict[str, str] | ServerSentEvent]:
    sent: dict[str, str] = {}  # what this connection last sent of each action: nothing twice
    head = await gateway.events_since(tenant, conversation_id, resume.seq if resume else 2**62)
    start = _starting_point(resume, head)
    seq = start.seq
    if start.index is not None:
        # The state now, from the head on: a change made while it is read comes again as an event
        # only if it differs from what was sent.
        current = await gateway.handoff(tenant, conversation_id)
        for index, status in enumerate(current.actions, start=1):
            if index > start.index:
                data = status.model_dump_json()
                sent[status.operation_id] = data
                yield _event(StreamPosition(seq, index), data)
    yield ServerSentEvent(comment="live")  # the client now sees every change after the state above
    # Then a look at the log each time the conversation's history grows (a long poll: an idle stream
    # costs nothing), instead of a query every tenth of a second.
    changes = gateway.conversation_changes(tenant, conversation_id, STREAM_IDLE_POLL_S)
    try:
        while not await request.is_disconnected():
            await anext(changes)
            page = await gateway.events_since(tenant, conversation_id, seq)
            if page is None:
                continue
            for event in page.events:
                status = event.status
                data = status.model_dump_json()
                if status.conversation_id != conversation_id or sent.get(status.operation_id) == data:
                    continue
                sent[status.operation_id] = data
                yield _event(StreamPosition(event.seq), data)
            seq = page.seq
    finally:
        await changes.aclose()
