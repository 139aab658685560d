"""What an action costs on Temporal Cloud, counted from its own history on the dev server as the bench
counts it (`bench.actions.billed_in_history`), and what operators still find by `SettledState`.

A send made by an activity writes the state once (its outcome), not `running` first: while the send
is in flight the attribute keeps `requested`. An accepted send the service has not finished shows
`running`; an unverified one `unknown`. A `presented` costs its update and no timer."""

import asyncio
from typing import Any

import httpx
from settled.bench.actions import Billed, billed_in_history
from temporalio.client import Client, WorkflowExecutionDescription

from settled.runtime.stack import Stack
from settled.temporal import visibility
from settled.temporal.identity import action_workflow_id
from tests.e2e.conftest import LONG_TIMEOUT, StackOptions
from tests.helpers import PAYOUT, REFUND, SERVICE_KINDS, Sandbox, create, new_id, status, wait_state

# A held send must still be held when the test reads the attribute: the long timeout's kinds, and the
# transfer service that accepts first and finishes later.
STACK = StackOptions({**LONG_TIMEOUT.kinds, "transfer": SERVICE_KINDS["transfer"]})
UPSERT = "search-attribute upsert"


def _read(stack: Stack, operation_id: str) -> tuple[Billed, WorkflowExecutionDescription]:
    """The action's Actions so far, from its history, and its search attributes as the server has them."""

    async def read() -> tuple[Billed, WorkflowExecutionDescription]:
        client = await Client.connect(stack.temporal_address)
        workflow_id = action_workflow_id(None, operation_id)
        billed = await billed_in_history(client, workflow_id)
        return billed, await client.get_workflow_handle(workflow_id).describe()

    return asyncio.run(read())


def _shown(description: WorkflowExecutionDescription) -> tuple[Any, Any]:
    attributes = description.typed_search_attributes
    return attributes.get(visibility.STATE), attributes.get(visibility.NEEDS_ATTENTION)


def test_a_send_by_an_activity_writes_the_state_once_and_a_presented_starts_no_timer(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("payout")
    hold = module_sandbox.fault("refunds", "create", "hold", op, apply=True)
    create(module_api, "payout", REFUND, operation_id=op)  # no deduplication: never sent inside a task
    module_sandbox.wait_held(op)
    in_flight, description = _read(module_stack, op)
    assert status(module_api, op)["state"] == "running"  # what reads show: the send may have landed
    assert _shown(description) == ("requested", False)  # what operators search by: not settled
    assert (in_flight.counts["activity"], in_flight.counts[UPSERT]) == (1, 0)

    module_sandbox.release(hold)
    confirmed = wait_state(module_api, op, "confirmed")
    settled, description = _read(module_stack, op)
    assert _shown(description) == ("confirmed", False)
    assert (settled.counts["activity"], settled.counts[UPSERT]) == (1, 1)
    assert settled.counts["workflow started"] == 1 and settled.counts["local activity"] == 0
    assert len(module_sandbox.writes(op)) == 1

    heard = {"channel": "voice", "text": confirmed["say"], "completed": True}
    assert module_api.post(f"/v1/actions/{op}/presented", json=heard).status_code == 200
    presented, _ = _read(module_stack, op)
    assert presented.counts["update"] == settled.counts["update"] + 1
    assert presented.counts["timer"] == settled.counts["timer"]
    assert presented.total == settled.total + 1


def test_an_accepted_send_shows_running_until_the_service_finishes_it(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox, slow_transfers: None
) -> None:
    op = new_id("transfer")
    accepted = create(module_api, "transfer", PAYOUT, operation_id=op, wait=10).json()
    assert accepted["state"] == "running" and accepted["business_ref"], accepted
    billed, description = _read(module_stack, op)
    assert _shown(description) == ("running", False)  # accepted is not done, and no call is in flight
    assert billed.counts[UPSERT] == 1

    finished = module_sandbox.http.post(f"/_sandbox/transfers/{accepted['business_ref']}/finish")
    assert finished.status_code == 200
    wait_state(module_api, op, "confirmed", timeout_s=60)
    billed, description = _read(module_stack, op)
    assert _shown(description) == ("confirmed", False)
    assert billed.counts[UPSERT] == 2


def test_a_send_whose_answer_is_lost_shows_unknown_until_a_lookup_confirms_it(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("payout-lost")
    module_sandbox.fault("refunds", "create", "drop_after_apply", op)
    # The send's own call looks it up at once: that lookup fails, so it stays `unknown`.
    module_sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503)
    create(module_api, "payout", REFUND, operation_id=op)  # looked up only when asked
    wait_state(module_api, op, "unknown", timeout_s=60)
    billed, description = _read(module_stack, op)
    assert _shown(description) == ("unknown", False)
    assert billed.counts[UPSERT] == 1  # `unknown` alone: the send's `running` was never written

    reconciled = module_api.post(f"/v1/actions/{op}/reconcile", params={"wait": 10})
    assert reconciled.status_code == 200, reconciled.text
    wait_state(module_api, op, "confirmed", timeout_s=60)
    billed, description = _read(module_stack, op)
    assert _shown(description) == ("confirmed", False)
    assert billed.counts[UPSERT] == 2
    assert len(module_sandbox.writes(op)) == 1
