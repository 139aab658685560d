"""What a conversation's own durable history says its channels were told: each channel event it
accepted, in order (not what the webhook answered)."""

import asyncio
import json

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.identity import conversation_workflow_id


async def _channel_events(
    stack: Stack, tenant: str | None, conversation_id: str
) -> list[tuple[str, str, str | None]]:
    client = await Client.connect(stack.temporal_address)
    history = await client.get_workflow_handle(
        conversation_workflow_id(tenant, conversation_id)
    ).fetch_history()
    events = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            continue
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if request.input.name != "channel_event":
            continue
        body = json.loads(request.input.args.payloads[0].data)
        events.append((body["type"], body["channel"], body.get("reason")))
    return events


def channel_events(
    stack: Stack, tenant: str | None, conversation_id: str
) -> list[tuple[str, str, str | None]]:
    return asyncio.run(_channel_events(stack, tenant, conversation_id))
