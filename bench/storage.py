"""What an action keeps in Temporal Cloud's active storage: its histories, for as long as each run
stays open. A settled action's run stays open `close_after_settled_s` after it settled (runs of
earlier revisions: `keep_open_after_settled_s`, the whole window of late controls), a run a late
control opened again as long again, and its conversation until it has been idle for its idle period;
Cloud bills the open histories' bytes by the hour.

Measured per run as its serialized size (the fetched events as one `History` message) times the hours
it is open: a closed run from its start to its close, the open one from its start to its last event
so far plus the wait before it closes. Every run of a workflow id counts (`settled.gateway.runs`).
"""

from dataclasses import dataclass
from datetime import timedelta

from settled.gateway.runs import every_run
from settled.workflows.conversation import IDLE_CLOSE_AFTER
from settled.workflows.messages import ConversationStart
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.client import Client

GB = 1e9
# The events that end a run.
CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)
HOUR_S = 3600.0


@dataclass(frozen=True)
class Stored:
    """One history: its size and the hours it stays open."""

    history_bytes: int
    hours_open: float

    @property
    def byte_hours(self) -> float:
        return self.history_bytes * self.hours_open


async def stored(client: Client, workflow_id: str, open_after_last_event: timedelta) -> Stored:
    """The workflow's runs as fetched now, its open run open until `open_after_last_event` after its
    last event: their bytes, and the hours they are open weighted by their bytes (so that the byte-hours
    are the runs' own)."""
    history_bytes, byte_hours = 0, 0.0
    for history in await every_run(client, workflow_id):
        events = history.events
        ran = events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()
        if events[-1].event_type not in CLOSED:
            ran += open_after_last_event
        size = History(events=events).ByteSize()
        history_bytes += size
        byte_hours += size * ran.total_seconds() / HOUR_S
    return Stored(history_bytes, byte_hours / history_bytes if history_bytes else 0.0)


async def idle_period(client: Client, workflow_id: str) -> timedelta:
    """The idle period a conversation's run keeps open after its last event: the one its start carries,
    else the workflow's own (runs started before the start carried one)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
    [start] = await client.data_converter.decode(payloads, [ConversationStart])
    seconds = start.idle_close_after_s
    return timedelta(seconds=seconds) if seconds else IDLE_CLOSE_AFTER


def per_action(actions: list[Stored], conversations: list[Stored]) -> dict[str, float]:
    """Active storage per action, the conversations' shared among their actions, and per 1,000 actions."""
    n = max(1, len(actions))
    action_byte_hours = sum(s.byte_hours for s in actions) / n
    conversation_byte_hours = sum(s.byte_hours for s in conversations) / n
    byte_hours = action_byte_hours + conversation_byte_hours
    return {
        "action_history_bytes": round(sum(s.history_bytes for s in actions) / n),
        "action_hours_open": round(sum(s.hours_open for s in actions) / n, 3),
        "conversation_history_bytes_per_action": round(sum(s.history_bytes for s in conversations) / n),
        "conversation_hours_open": round(
            sum(s.hours_open for s in conversations) / max(1, len(conversations)), 1
        ),
        "byte_hours": round(byte_hours),
        "action_share": round(action_byte_hours / byte_hours, 3) if byte_hours else 0.0,
        "gb_hours_per_1000_actions": round(byte_hours * 1000 / GB, 3),
        "action_gb_hours_per_1000_actions": round(action_byte_hours * 1000 / GB, 6),
    }
