"""A caller that never reports what the person heard (`reports_heard=false`, as the platforms' webhooks
and MCP create): the action's run closes in the task it settles in, with no linger and so no timer,
counted from its history as the bench counts it; a late `presented` still opens it again and is
recorded."""

import asyncio

import httpx

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.client.support import billed, closed_run_billed
from tests.helpers import BOOKING, Sandbox, new_id, status

KIND = "reservation"  # a booking without a go-ahead or a redaction: nothing keeps it open once confirmed
# The run closes in its settling task; a default linger (a minute) would close it only after this.
CLOSED_WITHIN_S = 45.0


def test_a_create_that_never_reports_heard_closes_once_confirmed_and_a_late_presented_opens_it(
    stack: Stack, api: httpx.Client, sandbox: Sandbox
) -> None:
    op, params = new_id(), {**BOOKING, "room": new_id("room")}
    body = {"conversation_id": new_id("conv"), "kind": KIND, "params": params, "operation_id": op}
    answer = api.post("/v1/actions", json=body, params={"wait": 10, "reports_heard": "false"})
    assert answer.status_code == 201 and answer.json()["state"] == "confirmed", answer.text
    workflow_id = action_workflow_id(None, op)

    closed = asyncio.run(closed_run_billed(stack.temporal_address, workflow_id, CLOSED_WITHIN_S))
    assert (closed.counts["workflow started"], closed.counts["timer"]) == (1, 0), closed.counts

    heard = {"channel": "text", "text": answer.json()["say"], "completed": True}
    presented = api.post(f"/v1/actions/{op}/presented", json=heard)
    assert presented.status_code == 200, presented.text
    assert status(api, op)["presented"]["text"] == heard["text"]  # recorded, read from durable state
    reopened = asyncio.run(billed(stack.temporal_address, workflow_id))
    assert reopened.counts["workflow started"] == 2  # the late presented's run, which lingers as today
    assert len(sandbox.writes(op)) == 1
