"""A lookup asked for while the action's send is in flight: nothing can be concluded before that send's
answer, which verifies the action by itself. A channel's opening asks no lookup of it, and a reconcile
that waits awaits the answer from the action's history, so neither adds an update to the action's
workflow (a billed Action); a send whose answer leaves it unverified is looked up as before.

Judged by the sandbox's records and the action's own history, on a stack whose sends may take 20 s (a
held request is still awaited when the test releases it)."""

import asyncio
import threading
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, wait_for, wait_state

UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


def _updates(stack: Stack, op: str) -> list[str]:
    """The names of the updates the action's workflow accepted, in order."""

    async def read() -> list[str]:
        client = await Client.connect(stack.temporal_address)
        history = await client.get_workflow_handle(action_workflow_id(None, op)).fetch_history()
        return [
            event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            for event in history.events
            if event.event_type == UPDATE_ACCEPTED
        ]

    return asyncio.run(read())


def _in_flight(sandbox: Sandbox, op: str) -> None:
    def in_flight() -> bool:
        return any(r["state"] == "in_flight" for r in sandbox.writes(op))

    wait_for(in_flight, what=f"{op}'s send in flight")


def _reconcile_meanwhile(api: httpx.Client, op: str, answers: list[dict[str, Any]]) -> threading.Thread:
    def ask() -> None:
        response = api.post(f"/v1/actions/{op}/reconcile", params={"wait": 25}, timeout=40)
        assert response.status_code == 200, response.text
        answers.append(response.json())

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def test_a_channel_opened_while_a_send_is_in_flight_lets_the_send_answer(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    hold = module_sandbox.fault("bookings", "create", "hold", op, apply=True)
    body = {"conversation_id": conversation, "operation_id": op, "authorized": True}
    create(module_api, "room_booking", BOOKING, **body)
    module_sandbox.wait_held(op)
    opened = module_api.post(
        f"/v1/conversations/{conversation}/events", json={"type": "channel_opened", "channel": "text"}
    )
    assert opened.status_code == 202 and opened.json()["reconciling"] == [op], opened.text
    module_sandbox.release(hold)
    confirmed = wait_state(module_api, op, "confirmed")
    assert [record["id"] for record in module_sandbox.records(op)] == [confirmed["business_ref"]]
    assert module_sandbox.requests(op, op="lookup") == []
    assert _updates(module_stack, op) == []


def test_a_reconcile_while_a_send_is_in_flight_answers_the_send_without_an_update(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id()
    # Answered by the service itself 3 s after it arrives: the reconcile is waiting by then.
    module_sandbox.fault("bookings", "create", "delay", op, delay_s=3.0)
    create(module_api, "room_booking", BOOKING, operation_id=op, authorized=True)
    _in_flight(module_sandbox, op)
    answers: list[dict[str, Any]] = []
    _reconcile_meanwhile(module_api, op, answers).join(timeout=40)
    [answer] = answers
    assert answer["state"] == "confirmed", answer
    assert [record["id"] for record in module_sandbox.records(op)] == [answer["business_ref"]]
    assert module_sandbox.requests(op, op="lookup") == []
    assert _updates(module_stack, op) == []


def test_a_reconcile_while_a_send_is_in_flight_looks_up_once_its_answer_is_lost(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """The refund service does not deduplicate: a 503 after the request arrived leaves it unknown,
    never re-sent blindly, and the waiting reconcile asks for the lookup then."""
    op = new_id()
    hold = module_sandbox.fault("refunds", "create", "hold", op, apply=False)
    create(module_api, "refund_nodedup", REFUND, operation_id=op)
    module_sandbox.wait_held(op)
    answers: list[dict[str, Any]] = []
    asking = _reconcile_meanwhile(module_api, op, answers)
    module_sandbox.release(hold)
    asking.join(timeout=40)
    [answer] = answers
    assert answer["state"] in ("unknown", "running", "confirmed"), answer
    assert _updates(module_stack, op) == ["reconcile"]
    wait_for(lambda: module_sandbox.requests(op, op="lookup"), what=f"a lookup of {op}")
    wait_state(module_api, op, "confirmed", timeout_s=60)  # not applied, past the horizon: sent again
    assert len(module_sandbox.records(op)) == 1


def test_a_waiting_reconcile_of_an_action_that_does_not_exist_is_a_404(module_api: httpx.Client) -> None:
    response = module_api.post(f"/v1/actions/{new_id()}/reconcile", params={"wait": 2})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found", response.text
