"""What every room of the gateway shares: the client and the settings it was built with, the handles
of an action's and a conversation's workflow, the guard each call goes through, and an action's
status as Temporal holds it."""

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from settled.gateway.changes import current, wall_clock
from settled.gateway.errors import GatewayError, guard
from settled.workflows.action import ActionWorkflow
from settled.workflows.conversation import ConversationWorkflow
from temporalio.client import Client, WorkflowHandle

from settled.domain.kinds import Kinds
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.runtime.config import Settings
from settled.temporal.identity import action_workflow_id, conversation_workflow_id

T = TypeVar("T")
ActionHandle = WorkflowHandle[ActionWorkflow, ActionStatus]


def finishing(call: Awaitable[T]) -> "asyncio.Future[T]":
    """A call that runs to its end even when its caller stops waiting for it (answered 503 at the
    deadline, or gone): Temporal may have received it already, and the caller's repeat meets what it
    made. Its outcome is read by whoever still waits, else dropped."""
    future = asyncio.ensure_future(call)
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


@dataclass
class Link:
    client: Client
    kinds: Kinds
    settings: Settings
    # How long past a caller's wait Temporal may take to answer.
    answer_grace_s: float
    # History events after which the workflows the gateway starts continue as new; None: their own.
    continue_as_new_after: int | None
    # How long a conversation stays open with nothing new.
    idle_close_after: timedelta
    # What time it is where the workflows run (a time-skipping test server keeps its own).
    clock: Callable[[], Awaitable[datetime]] = wall_clock

    def action(self, tenant: str | None, operation_id: str) -> ActionHandle:
        return self.client.get_workflow_handle_for(
            ActionWorkflow.run, action_workflow_id(tenant, operation_id)
        )

    def conversation(
        self, tenant: str | None, conversation_id: str
    ) -> WorkflowHandle[ConversationWorkflow, None]:
        return self.client.get_workflow_handle_for(
            ConversationWorkflow.run, conversation_workflow_id(tenant, conversation_id)
        )

    async def guard(self, call: Callable[[], Awaitable[T]], wait_s: float = 0.0) -> T:
        return await guard(call, wait_s, self.answer_grace_s)

    async def get(self, tenant: str | None, operation_id: str) -> ActionStatus:
        """The durable status: from the workflow's memo, which the server answers alone; from a query
        to a worker for runs that keep no memo (started before it) or whose first task is under way."""
        handle = self.action(tenant, operation_id)
        status = await self.memo_status(handle)
        if status is not None:
            return status
        return await self.guard(lambda: handle.query(ActionWorkflow.status))

    async def memo_status(self, handle: ActionHandle) -> ActionStatus | None:
        """The status in the run's memo (None before its first task completed, or for old runs)."""
        _, change = await self.guard(lambda: current(handle))
        return change[1] if change is not None else None

    async def maybe_taken(self, handle: ActionHandle, status: ActionStatus) -> ActionStatus:
        """`status`, or, where it may be a send waiting in its kind's queue, what a read shows now: a
        worker may have taken the send since (`settled.gateway.changes.current`)."""
        if status.state is not State.REQUESTED or not status.authorized:
            return status
        with suppress(GatewayError):
            return await self.memo_status(handle) or status
        return status
