"""What a conversation keeps, read from its history, for a run that no worker can answer a query for.

A run answers queries only once a workflow task of it has run. A conversation started lazily by a new
action (`LAZY_REVISION`) runs none until it is needed, and an operator may terminate one before its
first; either way its history holds all it keeps: the state carried into its start, and the actions
it was told of since (`track_action` signals). Everything else it keeps (channels, the stream's log)
changes only in a workflow task, which such a run has not had.
"""

from typing import Any

from settled.workflows.messages import ActionChanged, ConversationStart, ConversationState
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

STARTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED


async def kept_from_history(client: Client, handle: WorkflowHandle[Any, Any]) -> ConversationState:
    """The state of the handle's run as its history records it (the latest run when it names none)."""
    state = ConversationState()
    converter = client.data_converter

    def note(operation_id: str) -> None:
        if operation_id not in state.operation_ids:
            state.operation_ids.append(operation_id)

    async for event in handle.fetch_history_events(skip_archival=True):
        if event.event_type == STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [start] = await converter.decode(payloads, [ConversationStart])
            state = start.carried or ConversationState()
        elif event.event_type == SIGNALED:
            signal = event.workflow_execution_signaled_event_attributes
            if signal.signal_name == "track_action":
                [operation_id] = await converter.decode(signal.input.payloads, [str])
                note(operation_id)
            elif signal.signal_name == "action_changed":  # from actions of an earlier release
                [change] = await converter.decode(signal.input.payloads, [ActionChanged])
                for status in change.statuses:
                    note(status.operation_id)
    return state
