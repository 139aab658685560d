"""Creating an action: one start of its workflow (eager, in the API's own worker, when there is one),
its conversation told while it starts, and the caller answered with the run's first verified status
or, at the end of the wait, what it records. A repeat registers with the run it meets; one that meets
a closed run is answered from its record."""

import asyncio
import itertools
import uuid
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from settled.gateway.changes import awaited, current, snapshot
from settled.gateway.conversations import Conversations
from settled.gateway.errors import NOT_FOUND, GatewayError, already_started
from settled.gateway.link import ActionHandle, Link, finishing
from settled.gateway.reopening import Reopening
from settled.workflows.action import ActionWorkflow
from settled.workflows.messages import CURRENT_REVISION, ActionStart, Register
from temporalio.api.enums.v1 import PendingWorkflowTaskState
from temporalio.client import WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from settled.domain.machine import OTHER_CONVERSATION, ActionRecord, ControlRefused, NewAction
from settled.domain.models import ActionStatus, CreateAction
from settled.domain.params import InvalidParams, validate_params
from settled.domain.states import IN_PROGRESS
from settled.temporal import visibility
from settled.temporal.identity import TASK_QUEUE, action_workflow_id, operation_key

TASK_SCHEDULED = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
# New actions started eagerly at once by one API process; more are started through the task queue.
EAGER_AT_ONCE = 16
# How often a creating call also looks at the new action's memo while its long poll is pending: soon
# at first, then less often, so that a burst of waiting calls does not crowd out the starts it waits on.
MEMO_RECHECK_S = (0.25, 1.0, 2.0)


def _started(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the start created the run (False: one with this id was running already). The SDK keeps
    the server's answer on the handle without a public accessor; the version is pinned, and the
    repeated-create tests fail if this ever reads wrong."""
    response = getattr(handle, "_start_workflow_response", None)
    return bool(getattr(response, "started", True))


class Creating:
    def __init__(self, link: Link, conversations: Conversations, eager: bool) -> None:
        self.link = link
        self.conversations = conversations
        # A worker on this client (the API's own) runs a new action's first task: start it eagerly,
        # while fewer than EAGER_AT_ONCE are under way; beyond that (a burst), through the task queue,
        # so the API's process does not take on every first task of the burst itself.
        self.eager = eager
        self._eager_under_way = 0

    async def create(
        self,
        tenant: str | None,
        body: CreateAction,
        wait_s: float,
        one_conversation: bool = False,
        reports_heard: bool = True,
    ) -> tuple[bool, ActionStatus]:
        """(created, status). Nothing is recorded unless the kind and params are valid. A repeat of an
        operation id from another conversation is refused before the action's history is touched, with
        nothing of that action: an `operation_conflict`, or, to a caller who sees its conversation
        alone (`one_conversation`: a conversation token), the `not_found` a read would answer.
        `reports_heard`: the caller will report what the person heard (`NewAction.reports_heard`)."""
        try:
            return await self._create(tenant, body, wait_s, reports_heard)
        except GatewayError as error:
            if error.code != OTHER_CONVERSATION:
                raise
            if one_conversation:
                raise GatewayError("not_found", NOT_FOUND) from None
            raise GatewayError("operation_conflict", error.message) from None

    async def _create(
        self, tenant: str | None, body: CreateAction, wait_s: float, reports_heard: bool
    ) -> tuple[bool, ActionStatus]:
        link = self.link
        kind = link.kinds.get(body.kind)
        if kind is None:
            raise GatewayError(
                "unknown_kind", f"unknown kind {body.kind!r}; known: {', '.join(link.kinds.names())}"
            )
        try:
            validate_params(kind, body.params)
        except InvalidParams as error:
            raise GatewayError("invalid_params", str(error)) from None
        operation_id = body.operation_id or f"op_{uuid.uuid4().hex}"
        new = NewAction(
            operation_id=operation_id,
            operation_key=operation_key(tenant, operation_id),
            conversation_id=body.conversation_id,
            tenant=tenant,
            kind=kind,
            params=body.params,
            authorized=body.authorized,
            authorized_by=body.authorized_by,
            reports_heard=reports_heard,
        )
        register = Register(
            kind=kind.name, params=body.params, conversation_id=body.conversation_id, wait_s=wait_s
        )
        # Every step shares the caller's one wait (and the guard's grace past it): under a burst the
        # server takes seconds to start each workflow, and a start cut off at a grace of its own,
        # before the wait is spent, was never made.
        loop = asyncio.get_running_loop()
        ends = loop.time() + wait_s

        def left() -> float:
            return ends - loop.time()

        # The conversation learns of the action while it starts, not before: one round trip less on
        # the caller's path. Neither answer is given before both are durable, so a handoff read after
        # this call returns always lists the action; a crash between the two is mended by the
        # client's retry with the same operation id (both calls are idempotent).
        tracking = asyncio.ensure_future(
            self.conversations.track(tenant, body.conversation_id, operation_id, wait_s)
        )
        sent_at = datetime.now(UTC)
        eager = self.eager and self._eager_under_way < EAGER_AT_ONCE
        self._eager_under_way += eager
        try:
            # Under a burst a start can take longer than the caller's wait: it still finishes, so the
            # caller's repeat (the 503 asks for one) finds the action started, not missing.
            start = finishing(
                link.client.start_workflow(
                    ActionWorkflow.run,
                    ActionStart(
                        new=new,
                        creating_wait_s=wait_s,
                        revision=CURRENT_REVISION,
                        continue_as_new_after=link.continue_as_new_after,
                    ),
                    id=action_workflow_id(tenant, operation_id),
                    task_queue=TASK_QUEUE,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    search_attributes=visibility.action_attributes(
                        body.conversation_id, kind.name, tenant, "requested"
                    ),
                    static_summary=f"{kind.name} {operation_id} for {body.conversation_id}",
                    request_eager_start=eager,
                )
            )
            handle = await link.guard(lambda: asyncio.shield(start), left())
            if _started(handle):
                # What the start recorded, for a busy engine that has not run the run's first task
                # by the end of the wait (`_answer`). The guard leaves room for that answer even when
                # the start itself took most of the grace.
                recorded = ActionRecord.started(new, sent_at, registered=True).status()
                status = await link.guard(
                    lambda: self._answer(handle, left(), recorded),
                    max(left(), -link.answer_grace_s / 2),
                )
                await tracking
                return True, status
            # It runs already (a repeat, or a concurrent create): its update registers this call.
            register.wait_s = max(0.0, left())
            registered = await link.guard(
                lambda: handle.execute_update(ActionWorkflow.register, register), left()
            )
        except (WorkflowAlreadyStartedError, RPCError) as error:
            # The action ran to its end long ago; its record still answers queries.
            if not already_started(error):
                await asyncio.gather(tracking, return_exceptions=True)
                raise
            await tracking
            return False, await self._closed_repeat(tenant, operation_id, register)
        except BaseException:
            await asyncio.gather(tracking, return_exceptions=True)
            raise
        finally:
            self._eager_under_way -= eager
        await tracking
        status = registered.status
        if status.state in IN_PROGRESS and left() > 0:
            # The update answers at once (no timer): the outcome is awaited in the run's history.
            answered, left_s = status, left()
            status = await link.guard(
                lambda: awaited(
                    link.client, handle, lambda read: read.state not in IN_PROGRESS, left_s, answered
                ),
                left_s,
            )
        return registered.created, status

    async def _answer(self, handle: ActionHandle, left_s: float, recorded: ActionStatus) -> ActionStatus:
        """What the creating call is answered: the status the new run keeps in its memo, once it is out
        of requested/running or when the wait (`left_s`, less than 0 when the start took longer) ends.
        Learned by a long poll of the run's history, which answers as soon as a change is recorded (no
        query, no update), and by a slower look at the memo while the long poll has given nothing, for
        a server whose long poll answers late (Temporal's time-skipping test server waits for the
        close): once it has answered, a look at the memo would only cost the server a describe.

        Until the run's first workflow task is recorded there is no memo. A busy engine may not have
        handed that task to any worker when the wait and half the grace past it are spent: the call is
        then answered with `recorded`, what the start made durable (`requested`), rather than told to
        retry. Only while no worker has taken the task: one that has may be sending inside it."""
        link = self.link
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, left_s)
        recorded_by = loop.time() + left_s + link.answer_grace_s / 2
        latest: ActionStatus | None = None
        changed = asyncio.Event()

        def note(status: ActionStatus | None) -> None:
            nonlocal latest
            if status is not None and (latest is None or status.updated_at >= latest.updated_at):
                latest = status
                changed.set()

        async def follow() -> None:
            async for event in handle.fetch_history_events(wait_new_event=True, skip_archival=True):
                change = await snapshot(link.client, event)
                if change is not None:
                    note(change[1])
                    if change[1].state not in IN_PROGRESS:
                        return  # the answer: arm no further long poll for the server to serve

        async def recheck() -> None:
            for pause in itertools.chain(MEMO_RECHECK_S, itertools.repeat(MEMO_RECHECK_S[-1])):
                await asyncio.sleep(pause)
                if latest is not None and not following.done():
                    continue  # the long poll answers: a look at the memo would only cost the server
                with suppress(GatewayError):  # a slow look is no answer: the next one may be quicker
                    note(await link.memo_status(handle))

        following = asyncio.ensure_future(follow())
        watchers = [following, asyncio.ensure_future(recheck())]
        try:
            while True:
                if latest is not None and (latest.state not in IN_PROGRESS or loop.time() >= deadline):
                    return await link.maybe_taken(handle, latest)
                for watcher in watchers:
                    if watcher.done() and watcher.exception() is not None:
                        raise watcher.exception()  # type: ignore[misc]
                if latest is None and loop.time() >= recorded_by and await self._no_task_taken(handle):
                    return recorded
                changed.clear()
                # Until the first status, the caller's guard bounds the wait.
                timeout = max(0.0, deadline - loop.time()) if latest is not None else MEMO_RECHECK_S[0]
                with suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)
        finally:
            for watcher in watchers:
                watcher.cancel()

    async def _no_task_taken(self, handle: ActionHandle) -> bool:
        """Whether the run's first workflow task is still waiting for a worker, on its first attempt, and
        nothing is in the memo: then nothing has run, and nothing can have been sent."""
        try:
            described, change = await self.link.guard(lambda: current(handle))
        except GatewayError:
            return False
        pending = described.raw_description.pending_workflow_task
        return change is None and pending.state == TASK_SCHEDULED and pending.attempt == 1

    async def _closed_repeat(self, tenant: str | None, operation_id: str, register: Register) -> ActionStatus:
        handle = self.link.action(tenant, operation_id)
        status = await self.link.get(tenant, operation_id)
        # Compared here too: a worker of a release before conversations were compared answers the query.
        if status.conversation_id != register.conversation_id:
            message = f"operation {operation_id} belongs to another conversation"
            raise GatewayError(OTHER_CONVERSATION, message)
        last = await Reopening(self.link).read(handle)
        if last.closed is not None:
            # The record its run closed with answers, without a worker. A repeat changes nothing, so
            # it never opens the action again (no second workflow).
            try:
                last.closed.record.check_register(register.kind, register.params, register.conversation_id)
            except ControlRefused as error:
                raise GatewayError(error.code, error.message) from None
            return status
        conflict = await self.link.guard(lambda: handle.query(ActionWorkflow.conflict, register))
        if conflict:
            raise GatewayError("operation_conflict", conflict)
        return status
