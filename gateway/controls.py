"""The controls of an action that exists: authorize, amend, cancel, reconcile, presented. Each is an
update of the action's workflow, whose validator refuses a bad call before history is touched; a
control that changes nothing still answers a waiting caller with the verified outcome. A control of
a settled action whose run has closed, within its window of late controls, is checked against the
record that run closed with and, where it changes something, opens the action again
(`settled.gateway.reopening`).

A caller who waits (`wait_s`) for a control's outcome is answered by the update at once (runs since
`CLOSING_REVISION`: a wait in the workflow would start a timer, a billed Action) and awaits the outcome
by following the action's history (`settled.gateway.changes.awaited`, no Action), each control with
its own rule of when the outcome is in (`ready`); runs of earlier revisions still wait in their update,
and the follow-up then finds the outcome in, or the wait spent.

A lookup of an action whose send is in flight waits for that send's answer (nothing can be concluded
before it): a reconcile then awaits the answer the same way, and sends its update only if the answer
leaves the action unverified."""

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from settled.gateway.changes import awaited, current
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
# What a control on an action whose workflow has closed for good (past its window of late controls,
# or of a revision before actions were opened again) answers.
CLOSED_ANSWER = {"amend": "not_amendable", "cancel": "cannot_cancel", "presented": "not_amendable"}


# When a waiting caller's outcome is in, given the status the control's update answered and one read
# since: the rule each control's update waited on in runs before CLOSING_REVISION.
Ready = Callable[[ActionStatus, ActionStatus], bool]


def verified(_: ActionStatus, status: ActionStatus) -> bool:
    """Out of requested/running (an authorize's rule, and a create's)."""
    return status.state not in IN_PROGRESS


def resolved(_: ActionStatus, status: ActionStatus) -> bool:
    """A cancel's: cancelled or failed, or confirmed with no reversal under way (`compensating`)."""
    return status.state in (State.CANCELLED, State.FAILED) or (
        status.state is State.CONFIRMED and not status.compensating
    )


def looked_up(answered: ActionStatus, status: ActionStatus) -> bool:
    """A reconcile's: out of running/unknown, or a lookup answered since the reconcile (a `lookup` entry
    in the log after the last one the update answered with: every lookup answered leaves one, and only
    a lookup answered or the action settled ends a lookup request of a kind that has one). The update
    of a kind without a lookup still waits in the workflow (there a request may also end unrecorded),
    and its answer is the outcome."""
    if status.state not in MAY_BE_IN_FLIGHT:
        return True
    last = answered.log[-1] if answered.log else None
    since = status.log
    for index in range(len(status.log) - 1, -1, -1):
        if status.log[index] == last:
            since = status.log[index + 1 :]
            break
    return any(entry.event == "lookup" for entry in since)


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
            tenant, operation_id, "authorize", ActionWorkflow.authorize, request, check, verified
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
        return await self._control(
            tenant, operation_id, "cancel", ActionWorkflow.cancel, request, check, resolved
        )

    async def reconcile(self, tenant: str | None, operation_id: str, wait_s: float, why: str) -> ActionStatus:
        """Look the operation up now. While its send is in flight, a caller who waits is answered the
        send's answer, awaited without an update; the lookup is asked for only if the action is still
        unverified then (what is left of the wait goes to it)."""
        ready: Ready | None = None
        if wait_s > 0:
            deadline = asyncio.get_running_loop().time() + wait_s
            handle = self.link.action(tenant, operation_id)
            _, now = await self.link.guard(lambda: current(handle))
            if now is not None and send_in_flight(now[1]):
                status = await self.link.guard(
                    lambda: awaited(
                        self.link.client, handle, lambda read: not send_in_flight(read), wait_s, now[1], now
                    ),
                    wait_s,
                )
                wait_s = max(0.0, deadline - asyncio.get_running_loop().time())
                if send_in_flight(status) or status.state not in MAY_BE_IN_FLIGHT:
                    return status  # still in flight at the end of the wait, or verified
            kind = self.link.kinds.get(now[1].kind) if now is not None else None
            if kind is not None and kind.has_lookup:
                ready = looked_up  # a kind without one waits in its update (`looked_up`)
        request = Reconcile(why=why, wait_s=wait_s)
        check = _checked(lambda record, now: record.check_reconcile(now))
        return await self._control(
            tenant, operation_id, "reconcile", ActionWorkflow.reconcile, request, check, ready
        )

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
        self,
        tenant: str | None,
        operation_id: str,
        name: str,
        update: Any,
        arg: Any,
        check: Check,
        ready: Ready | None = None,
    ) -> ActionStatus:
        """Send the control; `check` is its validator's check, for a record whose run has closed. A
        caller who waits is then answered once `ready` holds, or at the end of the wait."""
        handle = self.link.action(tenant, operation_id)
        wait_s = getattr(arg, "wait_s", 0.0)
        deadline = asyncio.get_running_loop().time() + wait_s

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
        left_s = deadline - asyncio.get_running_loop().time()
        if ready is not None and left_s > 0 and not ready(status, status):
            answered = status

            def outcome_in(read: ActionStatus) -> bool:
                return ready(answered, read)

            status = await self.link.guard(
                lambda: awaited(self.link.client, handle, outcome_in, left_s, answered), left_s
            )
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
