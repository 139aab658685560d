"""A conversation started by a new action runs no workflow task until something needs one.

On the real dev server: the conversation's history holds its start and the action's id, and nothing
else, while the handoff (read from that history) already lists the action. Another action or a
channel event wakes it; a conversation that nothing woke closes at the end of its idle period,
counting from its start, not from its first task.
"""

import asyncio
from datetime import timedelta

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.identity import conversation_workflow_id
from tests.e2e.inprocess import closed_idle_conversation
from tests.helpers import BOOKING, create, new_id

TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}
IDLE = timedelta(seconds=3)


async def _conversation_history(stack: Stack, conversation_id: str) -> list[HistoryEvent]:
    client = await Client.connect(stack.temporal_address)
    history = await client.get_workflow_handle(
        conversation_workflow_id(None, conversation_id)
    ).fetch_history()
    return list(history.events)


def _operation_ids(api: httpx.Client, conversation_id: str) -> list[str]:
    handoff = api.get(f"/v1/conversations/{conversation_id}/handoff")
    assert handoff.status_code == 200, handoff.text
    return [action["operation_id"] for action in handoff.json()["actions"]]


def test_a_new_actions_conversation_records_it_without_a_task_and_wakes_when_needed(
    stack: Stack, api: httpx.Client
) -> None:
    conversation_id, first, second = new_id("conv"), new_id(), new_id()
    booked = create(
        api,
        "room_booking",
        BOOKING,
        operation_id=first,
        conversation_id=conversation_id,
        authorized=True,
        wait=10,
    )
    assert booked.status_code == 201 and booked.json()["state"] == "confirmed", booked.text

    events = asyncio.run(_conversation_history(stack, conversation_id))
    assert [e.event_type for e in events] == [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    ]
    assert events[0].workflow_execution_started_event_attributes.first_workflow_task_backoff.ToSeconds() > 0
    assert _operation_ids(api, conversation_id) == [first]

    # A second action needs the conversation: its task runs, and both are listed, oldest first.
    create(api, "room_booking", BOOKING, operation_id=second, conversation_id=conversation_id, wait=5)
    assert _operation_ids(api, conversation_id) == [first, second]
    events = asyncio.run(_conversation_history(stack, conversation_id))
    assert any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events)

    event = api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "interrupted", "channel": "voice"}
    )
    assert event.status_code == 202, event.text
    handoff = api.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert handoff["channels"]["voice"] == "open"
    assert [action["operation_id"] for action in handoff["actions"]] == [first, second]


def test_a_channel_event_is_the_first_task_of_a_lazy_conversation(stack: Stack, api: httpx.Client) -> None:
    conversation_id, op = new_id("conv"), new_id()
    create(api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation_id, wait=5)
    assert not any(
        e.event_type in TASK_EVENTS for e in asyncio.run(_conversation_history(stack, conversation_id))
    )

    opened = api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "channel_opened", "channel": "text"}
    )
    assert opened.status_code == 202, opened.text
    handoff = api.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert handoff["channels"] == {"voice": "unused", "text": "open"}
    assert [action["operation_id"] for action in handoff["actions"]] == [op]
    assert handoff["work"] == "waiting_for_user"


def test_a_conversation_nothing_woke_closes_when_its_idle_period_since_its_start_ends(
    stack: Stack, api: httpx.Client
) -> None:
    conversation_id, op = new_id("conv"), new_id()
    events = asyncio.run(closed_idle_conversation(stack, conversation_id, op, IDLE))
    started = events[0].event_time.ToDatetime()
    first_task = next(e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    # The first task ran when the start delay (its idle period) ran out, not before.
    assert first_task.event_time.ToDatetime() - started >= IDLE
    # It knew it had been idle since its start: it waited a moment, not another idle period.
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for e in events
        if e.timer_started_event_attributes.timer_id
    ]
    assert timers and max(timers) < IDLE, timers
    # Closed, it still answers: the action is listed, and the next event reopens it with it.
    assert _operation_ids(api, conversation_id) == [op]
    reopened = api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "channel_opened", "channel": "voice"}
    )
    assert reopened.status_code == 202, reopened.text
    assert _operation_ids(api, conversation_id) == [op]
