"""The controls of an action that exists: authorize, amend, cancel, reconcile, presented. Each is an
update of the action's workflow, whose validator refuses a bad call before history is touched; a
control that changes nothing still answers a waiting caller with the verified outcome. A control of
a settled action whose run has closed, within its window of late controls, is checked against the
record that run closed with and, where it changes something, opens the action again
(`settled.gateway.reopening`).

A lookup of an action whose send is in flight waits for that send's answer (nothing can be concluded
before it): a reconcile then awaits the answer by a long poll of the action's history, which costs no
Action, and sends its update only if the answer leaves the action unverified."""

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from settled.gateway.changes import action_changes, current
from settled.gateway.errors import NOT_FOUND, GatewayError, unless_missing
from settled.gateway.link import ActionHandle, Link
from settled.gateway.reopening import Check, Reopening
from settled.workflows.action import ActionWorkflow
from settled.workflows.messages import Amend, Authorize, Cancel, Present, Reconcile
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateStage

from settled.domain.machine import ActionRecord, ControlRefused, send_in_flight
from settled.domain.models import WAIT_MAX_S, ActionStatus, PresentedBody
from settled.domain.params import InvalidParams, validate_params, validate_text
from settled.domain.states import IN_PROGRESS, MAY_BE_IN_FLIGHT, SETTLED, State

# A status read costs the server alone (the memo), so a no-op control's wait can look often.
NOOP_WAIT_POLL_S = 0.02
# How often a reconcile awaiting a send's answer also reads the memo, for a server whose long poll of
# the history answers late (Temporal's time-skipping test server answers once the run closes).
SEND_RECHECK_S = 1.0
# What a control on an action whose workflow has closed for good (past its window of late controls,
# or of a revision before actions were opened again) answers.
CLOSED_ANSWER = {"amend": "not_amendable", "cancel": "cannot_cancel", "presented": "not_amendable"}


def _checked(check: Callable[[ActionRecord, datetime], None]) -> Check:
    """A control's check of a closed run's record, refusing as its update's validator would."""

    def checked(record: ActionRecord, now: datetime) -> None:
        try:
            check(record, now)
        except ControlRefused as error:
            raise GatewayError(error.code, error.message) from None

    return checked


def _valid(validate: Callable[[dict[str, Any]], None], params: dict[str, Any]) -> None:
    try:
        validate(params)
    except InvalidParams as error:
        raise GatewayError("invalid_params", str(error)) from None


class Controls:
    def __init__(self, link: Link) -> None:
        self.link = link
        self.reopening = Reopening(link)

    async def authorize(
        self, tenant: str | None, operation_id: str, by: str | None, wait_s: float
    ) -> ActionStatus:
        request = Authorize(by=by, wait_s=wait_s)
        check = _checked(lambda record, _: record.check_authorize())
        return await self._control(
            tenant, operation_id, "authorize", ActionWorkflow.authorize, request, check
        )

    async def amend(self, tenant: str | None, operation_id: str, params: dict[str, Any]) -> ActionStatus:
        _valid(validate_text, params)  # even for an action whose kind is no longer served
        status = await self.link.get(tenant, operation_id)
        if status.dispatched and status.state not in SETTLED:
            # Refused here too, for a queued send a worker has taken: only Temporal records that, and
            # the amend would wait for the send's answer to learn it.
            raise GatewayError("already_dispatched", "a request may already have reached the business system")
        kind = self.link.kinds.get(status.kind)
        if kind is not None:
            _valid(lambda checked: validate_params(kind, checked), params)
        check = _checked(lambda record, now: record.check_amend(params, now))
        return await self._control(
            tenant, operation_id, "amend", ActionWorkflow.amend, Amend(params=params), check
        )

    async def cancel(
        self, tenant: str | None, operation_id: str, by: str | None, reason: str | None, wait_s: float
    ) -> ActionStatus:
        request = Cancel(by=by, reason=reason, wait_s=wait_s)
        check = _checked(lambda record, _: record.check_cancel())
        return await self._control(tenant, operation_id, "cancel", ActionWorkflow.cancel, request, check)

    async def reconcile(self, tenant: str | None, operation_id: str, wait_s: float, why: str) -> ActionStatus:
        """Look the operation up now. While its send is in flight, a caller who waits is answered the
        send's answer, awaited without an update; the lookup is asked for only if the action is still
        unverified then (what is left of the wait goes to it)."""
        if wait_s > 0:
            deadline = asyncio.get_running_loop().time() + wait_s
            handle = self.link.action(tenant, operation_id)
            _, now = await self.link.guard(lambda: current(handle))
            if now is not None and send_in_flight(now[1]):
                status = await self.link.guard(lambda: self._answered_send(handle, now, wait_s), wait_s)
                wait_s = max(0.0, deadline - asyncio.get_running_loop().time())
                if send_in_flight(status) or status.state not in MAY_BE_IN_FLIGHT:
                    return status  # still in flight at the end of the wait, or verified
        request = Reconcile(why=why, wait_s=wait_s)
        check = _checked(lambda record, now: record.check_reconcile(now))
        return await self._control(
            tenant, operation_id, "reconcile", ActionWorkflow.reconcile, request, check
        )

    async def _answered_send(
        self, handle: ActionHandle, now: tuple[int, ActionStatus], wait_s: float
    ) -> ActionStatus:
        """The status once the send in flight in `now` is answered, or as it is when the wait ends:
        followed by a long poll of the history, and a slower read of the memo beside it."""
        number, latest = now

        def note(status: ActionStatus) -> bool:
            nonlocal latest
            if status.updated_at >= latest.updated_at:
                latest = status
            return not send_in_flight(latest)

        async def follow() -> None:
            async with contextlib.aclosing(action_changes(self.link.client, handle, number)) as changes:
                async for _, status in changes:
                    if note(status):
                        return

        async def recheck() -> None:
            while True:
                await asyncio.sleep(SEND_RECHECK_S)
                _, read = await current(handle)
                if read is not None and note(read[1]):
                    return

        watchers = [asyncio.ensure_future(follow()), asyncio.ensure_future(recheck())]
        try:
            done, _ = await asyncio.wait(watchers, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            for watcher in done:
                watcher.result()  # a failure to read is the caller's to hear, not a status
        finally:
            for watcher in watchers:
                watcher.cancel()
        return latest

    async def presented(self, tenant: str | None, operation_id: str, body: PresentedBody) -> ActionStatus:
        request = Present.model_validate(body.model_dump())
        check = _checked(lambda record, _: None)  # what a channel presented is always recorded
        return await self._control(
            tenant, operation_id, "presented", ActionWorkflow.presented, request, check
        )

    async def look_up_soon(
        self, tenant: str | None, operation_id: str, why: str, status: ActionStatus | None = None
    ) -> None:
        """Start a lookup that the channel will ask about next: answered here once accepted, run in the
        background with the channel counted as waiting (so it may run inside the workflow task). None
        for an action whose `status`, as just read, shows its send in flight: that send's answer
        verifies it, and automatic lookups follow if the answer is lost."""
        if status is not None and send_in_flight(status):
            return
        handle = self.link.action(tenant, operation_id)
        request = Reconcile(why=why, wait_s=WAIT_MAX_S)
        await unless_missing(
            self.link.guard(
                lambda: handle.start_update(
                    ActionWorkflow.reconcile, request, wait_for_stage=WorkflowUpdateStage.ACCEPTED
                )
            ),
            "noop",
        )

    async def _control(
        self, tenant: str | None, operation_id: str, name: str, update: Any, arg: Any, check: Check
    ) -> ActionStatus:
        """Send the control; `check` is its validator's check, for a record whose run has closed."""
        handle = self.link.action(tenant, operation_id)
        wait_s = getattr(arg, "wait_s", 0.0)

        async def send() -> ActionStatus:
            return await self.link.guard(lambda: handle.execute_update(update, arg), wait_s)

        try:
            try:
                status = await send()
            except GatewayError as error:
                if error.code != "not_found":
                    raise
                # The run has closed (or there is none): a late control may open it again.
                late = await self.reopening.send(handle, check, send)
                if late is None:
                    return await self._closed(tenant, operation_id, name, handle)
                status = late
        except GatewayError as error:
            if error.code == "noop":
                # Nothing to change, but a caller who asked to wait still gets the verified outcome.
                return await self._await_verified(tenant, operation_id, wait_s)
            raise
        return await self.link.maybe_taken(handle, status)

    async def _closed(
        self, tenant: str | None, operation_id: str, name: str, handle: ActionHandle
    ) -> ActionStatus:
        """The answer to a control of an action whose run has closed for good (or that never was)."""
        if not await self._has_closed(handle):
            raise GatewayError("not_found", NOT_FOUND)
        if name in CLOSED_ANSWER:
            raise GatewayError(CLOSED_ANSWER[name], "the action is settled and its record is closed")
        return await self.link.get(tenant, operation_id)

    async def _has_closed(self, handle: ActionHandle) -> bool:
        """Whether the workflow exists and has closed: an update to a closed workflow is answered
        NOT_FOUND, like one to a workflow that never existed; its description tells them apart."""
        description = await unless_missing(self.link.guard(handle.describe))
        return description is not None and description.status is not WorkflowExecutionStatus.RUNNING

    async def _await_verified(self, tenant: str | None, operation_id: str, wait_s: float) -> ActionStatus:
        """The status once it is out of requested/running, or at the end of the wait (polled reads:
        this path runs only when the control itself changed nothing)."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            status = await self.link.get(tenant, operation_id)
            waiting_on_us = status.state is State.REQUESTED and not status.authorized
            if (
                status.state not in IN_PROGRESS
                or waiting_on_us
                or asyncio.get_running_loop().time() >= deadline
            ):
                return status
            await asyncio.sleep(NOOP_WAIT_POLL_S)
