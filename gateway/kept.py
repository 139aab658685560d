"""What a conversation keeps, read from its history: the handoff, the events route and the stream read
it so, with nothing asked of a worker (a query is a billed Temporal Action, and a run that never ran
a workflow task cannot answer one).

Its history holds what the view needs: the state carried into its start, the actions it was told of
since (`track_action` signals) and its channels' events (`channel_event` updates, each applied by the
run as it was accepted, by the rule `ChannelRecord.apply` states once). Only the stream's log of
actions of an earlier release (their `action_changed` signals) is the run's own to tell: a history
that holds one is read as `whole = False`.
"""

from dataclasses import dataclass
from typing import Any

from settled.workflows.messages import (
    ActionChanged,
    ChannelEvent,
    ChannelRecord,
    ConversationStart,
    ConversationState,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

STARTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


@dataclass
class Kept:
    state: ConversationState
    # False when the history holds changes of actions of an earlier release, whose stream log only the
    # run itself keeps (its query tells it).
    whole: bool


async def kept_from_history(client: Client, handle: WorkflowHandle[Any, Any]) -> Kept:
    """The state of the handle's run as its history records it (the latest run when it names none)."""
    kept = Kept(ConversationState(), whole=True)
    converter = client.data_converter

    def note(operation_id: str) -> None:
        if operation_id not in kept.state.operation_ids:
            kept.state.operation_ids.append(operation_id)

    async for event in handle.fetch_history_events(skip_archival=True):
        if event.event_type == STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [start] = await converter.decode(payloads, [ConversationStart])
            kept.state = start.carried or ConversationState()
        elif event.event_type == SIGNALED:
            signal = event.workflow_execution_signaled_event_attributes
            if signal.signal_name == "track_action":
                [operation_id] = await converter.decode(signal.input.payloads, [str])
                note(operation_id)
            elif signal.signal_name == "action_changed":  # from actions of an earlier release
                kept.whole = False
                [change] = await converter.decode(signal.input.payloads, [ActionChanged])
                for status in change.statuses:
                    note(status.operation_id)
        elif event.event_type == UPDATE_ACCEPTED:
            update = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
            if update.name == "channel_event":
                [channel_event] = await converter.decode(update.args.payloads, [ChannelEvent])
                kept.state.channels.setdefault(channel_event.channel, ChannelRecord()).apply(channel_event)
    return kept
