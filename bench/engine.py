"""The engine's cost of a confirmed action, counted in Temporal's own histories: executions, workflow
tasks and history events per confirmed action, for settled (the action and its conversation) and for
the floor's workflow. Unlike the latencies, these counts do not depend on how busy the machine is.

Read once the answers are in: what each action cost the engine up to then (an action stays open after
it settled, for late controls, and a conversation closes after its idle period: that later work is
not on any caller's path and is not counted here).
"""

from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from settled.temporal.identity import action_workflow_id, conversation_workflow_id

TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
ACTIVITY_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


@dataclass
class Cost:
    """Totals over some workflows' histories (their current runs)."""

    executions: int = 0
    workflow_tasks: int = 0
    events: int = 0
    updates: int = 0
    activities: int = 0

    def add(self, other: "Cost") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def per(self, n: int) -> dict[str, float]:
        return {name: round(getattr(self, name) / max(1, n), 2) for name in self.__dataclass_fields__}


async def history_cost(client: Client, workflow_id: str) -> Cost:
    """One workflow's cost so far; nothing for a workflow that was never started."""
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            return Cost()
        raise
    types = [event.event_type for event in history.events]
    return Cost(
        executions=1,
        workflow_tasks=types.count(TASK_COMPLETED),
        events=len(types),
        updates=types.count(UPDATE_ACCEPTED),
        activities=types.count(ACTIVITY_SCHEDULED),
    )


async def settled_cost(
    client: Client, operation_ids: list[str], conversation_ids: list[str]
) -> dict[str, object]:
    """Per confirmed action: its own workflow's cost, its conversation's share (the conversations'
    whole histories, events from a channel included, over the actions) and the two together."""
    action, conversation = Cost(), Cost()
    for op in operation_ids:
        action.add(await history_cost(client, action_workflow_id(None, op)))
    for conversation_id in dict.fromkeys(conversation_ids):
        conversation.add(await history_cost(client, conversation_workflow_id(None, conversation_id)))
    total = Cost()
    total.add(action)
    total.add(conversation)
    n = len(operation_ids)
    return {"actions": n, "action": action.per(n), "conversation": conversation.per(n), "total": total.per(n)}


async def actions_cost(client: Client, operation_ids: list[str]) -> dict[str, object]:
    """Per action: its own workflow's cost alone (for actions whose conversations are not the point)."""
    total = Cost()
    for op in operation_ids:
        total.add(await history_cost(client, action_workflow_id(None, op)))
    return {"actions": len(operation_ids), "total": total.per(len(operation_ids))}


async def floor_cost(client: Client, workflow_ids: list[str]) -> dict[str, object]:
    total = Cost()
    for workflow_id in workflow_ids:
        total.add(await history_cost(client, workflow_id))
    return {"actions": len(workflow_ids), "total": total.per(len(workflow_ids))}
