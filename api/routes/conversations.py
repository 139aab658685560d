"""The conversation routes: channel events, the handoff, and the live stream (contract §3)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from sse_starlette.sse import EventSourceResponse, ServerSentEvent

from api.deps import GatewayDep, TenantDep
from api.strict import StrictJsonRoute, valid_path_ids
from settled.gateway import Gateway
from settled.handoff import Handoff
from settled.models import IDENTIFIER_PATTERN, ActionStatus, ConversationEventBody
from workflows.messages import ChannelEvent

router = APIRouter(
    prefix="/v1/conversations",
    tags=["conversations"],
    route_class=StrictJsonRoute,
    dependencies=[Depends(valid_path_ids)],
)

ConversationId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="1-128 of A-Z a-z 0-9 . _ : -")]
STREAM_POLL_S = 0.1


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
    conversation_id: ConversationId, request: Request, tenant: TenantDep, gateway: GatewayDep
) -> EventSourceResponse:
    """The current state of every action first, then every change, in order."""
    return EventSourceResponse(_events(gateway, tenant, conversation_id, request), ping=15)


def _event(seq: int, status: ActionStatus) -> dict[str, str]:
    return {"event": "action", "id": str(seq), "data": status.model_dump_json()}


async def _events(
    gateway: Gateway, tenant: str | None, conversation_id: str, request: Request
) -> AsyncIterator[dict[str, str] | ServerSentEvent]:
    # The head first, then the state: a change in between is sent twice rather than missed.
    head = await gateway.events_since(tenant, conversation_id, 2**62)
    seq = head.seq if head else 0
    current = await gateway.handoff(tenant, conversation_id)
    for status in current.actions:
        yield _event(seq, status)
    yield ServerSentEvent(comment="live")  # the client now sees every change after the state above
    while not await request.is_disconnected():
        await asyncio.sleep(STREAM_POLL_S)
        page = await gateway.events_since(tenant, conversation_id, seq)
        if page is None:
            continue
        for event in page.events:
            if event.status.conversation_id == conversation_id:
                yield _event(event.seq, event.status)
        seq = page.seq
