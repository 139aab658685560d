"""A gateway in the test's own process, on a stack's dev server (the stack's worker runs the workflows),
for what the API process cannot be made to do on cue: a conversation whose idle period is seconds
(the real one is 30 days; used by the lazy conversation tests and the golden recorder), a caller's
deadline that has passed before Temporal could answer."""

import asyncio
from datetime import timedelta
from typing import Any

from settled.gateway.gateway import Gateway
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus

from settled.domain.kinds import load_kinds
from settled.domain.models import CreateAction
from settled.runtime.config import Settings
from settled.runtime.stack import Stack
from settled.temporal.codec import data_converter
from settled.temporal.identity import conversation_workflow_id
from tests.helpers import BOOKING

CLOSE_WITHIN_S = 60.0
POLL_S = 0.2


async def gateway_on(
    stack: Stack, *, idle_close_after: timedelta | None = None, answer_grace_s: float | None = None
) -> Gateway:
    """A gateway on the stack; what is not given is the gateway's own."""
    client = await Client.connect(stack.temporal_address, data_converter=data_converter({}))
    tuning: dict[str, Any] = {"idle_close_after": idle_close_after, "answer_grace_s": answer_grace_s}
    given = {name: value for name, value in tuning.items() if value is not None}
    return Gateway(client, load_kinds(stack.config), Settings(), **given)


async def closed_idle_conversation(
    stack: Stack, conversation_id: str, operation_id: str, idle: timedelta
) -> list[HistoryEvent]:
    """Create a booking in a new conversation that nothing else touches; its history once it closed."""
    gateway = await gateway_on(stack, idle_close_after=idle)
    body = CreateAction(
        conversation_id=conversation_id, kind="room_booking", params=BOOKING, operation_id=operation_id
    )
    created, _ = await gateway.create(None, body, wait_s=0)
    assert created
    handle = gateway.client.get_workflow_handle(conversation_workflow_id(None, conversation_id))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CLOSE_WITHIN_S
    while (described := await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
        assert loop.time() < deadline, f"the idle conversation did not close within {CLOSE_WITHIN_S:g}s"
        await asyncio.sleep(POLL_S)
    assert described.status is WorkflowExecutionStatus.COMPLETED, described.status
    return list((await handle.fetch_history()).events)
