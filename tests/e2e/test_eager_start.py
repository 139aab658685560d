"""A new action starts eagerly in the API's own worker, and its history carries no patch markers.

Read from the workflows' histories on the real dev server: which process ran the first workflow task
(its identity is `PID@HOST`), how soon after it was scheduled, and which markers and search-attribute
writes the runs recorded.
"""

import asyncio

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id, conversation_workflow_id
from tests.e2e.conftest import StackOptions
from tests.helpers import BOOKING, api_client, create, new_id

PATCH_MARKER = "core_patch"  # the marker name Temporal's SDK records for `workflow.patched`


async def _histories(
    stack: Stack, op: str, conversation: str
) -> tuple[list[HistoryEvent], list[HistoryEvent]]:
    client = await Client.connect(stack.temporal_address)
    action = await client.get_workflow_handle(action_workflow_id(None, op)).fetch_history()
    talk = await client.get_workflow_handle(conversation_workflow_id(None, conversation)).fetch_history()
    return list(action.events), list(talk.events)


def _first_task_identity(events: list[HistoryEvent]) -> str:
    started = next(e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    return started.workflow_task_started_event_attributes.identity


def _patch_traces(events: list[HistoryEvent]) -> list[str]:
    """Patch markers, and search-attribute writes of TemporalChangeVersion (one per patch asked)."""
    traces = []
    for event in events:
        marker = event.marker_recorded_event_attributes.marker_name
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and marker == PATCH_MARKER:
            traces.append("marker")
        if event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            if "TemporalChangeVersion" in fields:
                traces.append("TemporalChangeVersion")
    return traces


def _create_confirmed(api: httpx.Client) -> tuple[str, str]:
    op, conversation = new_id(), new_id("conv")
    answer = create(
        api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation, authorized=True, wait=10
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["state"] == "confirmed"
    return op, conversation


def test_a_new_action_runs_its_first_task_in_the_api_and_records_no_patch(
    stack: Stack, api: httpx.Client
) -> None:
    op, conversation = _create_confirmed(api)
    action, talk = asyncio.run(_histories(stack, op, conversation))
    api_pid = stack.children["api"].popen.pid
    assert _first_task_identity(action).startswith(f"{api_pid}@"), _first_task_identity(action)
    # Eager: the task was handed over with the start, not matched from the task queue.
    assert [e.event_type for e in action[:3]] == [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    ]
    assert _patch_traces(action) == [] and _patch_traces(talk) == []
    # The send ran inside that first task (a local activity), so the action took one workflow task.
    assert sum(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED for e in action) == 0
    # A repeat finds it running: registered by the update, not created again.
    again = create(
        api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation, authorized=True
    )
    assert (again.status_code, again.json()["state"]) == (200, "confirmed")


# The module's own stack (module_stack), for the one test that turns the API's worker off.
STACK = StackOptions(env={"SETTLED_API_WORKER": "0"})


def test_with_the_api_worker_off_actions_start_through_the_task_queue(
    module_stack: Stack,
) -> None:
    with api_client(module_stack) as api:
        op, conversation = _create_confirmed(api)
        again = create(api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation)
        assert again.status_code == 200
    action, _ = asyncio.run(_histories(module_stack, op, conversation))
    worker_pid = module_stack.children["worker"].popen.pid
    assert _first_task_identity(action).startswith(f"{worker_pid}@"), _first_task_identity(action)
    assert _patch_traces(action) == []
