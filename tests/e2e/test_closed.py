"""Closed workflows on the real Temporal server: the time-skipping tier (tests/timeskip) lets an action's
open week and a conversation's idle month pass on the test server, whose errors are not shaped like
the real server's. Here the same answers are checked on the dev server, with the workflows closed by
termination (the days cannot pass here)."""

import httpx
from temporalio.client import Client

from settled.runtime.stack import Stack
from settled.temporal.codec import data_converter
from settled.temporal.identity import action_workflow_id, conversation_workflow_id
from tests.helpers import BOOKING, Sandbox, create, new_id, status


async def _terminate(stack: Stack, workflow_id: str) -> None:
    client = await Client.connect(stack.temporal_address, data_converter=data_converter({}))
    await client.get_workflow_handle(workflow_id).terminate(reason="closed by the test")


def _booked(api: httpx.Client, conversation_id: str, op: str) -> httpx.Response:
    """A booking authorized and confirmed in the call."""
    return create(
        api,
        "room_booking",
        BOOKING,
        operation_id=op,
        conversation_id=conversation_id,
        authorized=True,
        wait=5,
    )


async def test_every_action_route_answers_a_closed_action_by_its_record(
    stack: Stack, api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = _booked(api, conversation_id, op).json()
    assert booked["state"] == "confirmed"
    await _terminate(stack, action_workflow_id(None, op))

    assert status(api, op)["business_ref"] == booked["business_ref"]
    same = create(api, "room_booking", BOOKING, operation_id=op, conversation_id=conversation_id)
    assert same.status_code == 200 and same.json()["business_ref"] == booked["business_ref"], same.text
    other = create(api, "room_booking", {"room": "Bo", "day": "Friday"}, operation_id=op)
    assert (other.status_code, other.json()["error"]["code"]) == (409, "operation_conflict"), other.text
    assert api.post(f"/v1/actions/{op}/reconcile").json()["state"] == "confirmed"
    for route, body, code in (
        ("amend", {"params": {"room": "Bo", "day": "Friday"}}, "not_amendable"),
        ("cancel", {}, "cannot_cancel"),
        ("presented", {"channel": "text", "text": "Booked.", "completed": True}, "not_amendable"),
    ):
        answer = api.post(f"/v1/actions/{op}/{route}", json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, code), (route, answer.text)
    assert len(sandbox.writes(op)) == 1


async def test_a_closed_conversation_is_reopened_with_what_it_kept(stack: Stack, api: httpx.Client) -> None:
    conversation_id, op = new_id("conv"), new_id()
    _booked(api, conversation_id, op)
    assert api.get(f"/v1/conversations/{conversation_id}/handoff").json()["actions"][0]["operation_id"] == op
    # Terminated before any workflow task of it ran (a new action's conversation runs none until it is
    # needed): no worker can answer a query for it, and what it kept is read from its history.
    await _terminate(stack, conversation_workflow_id(None, conversation_id))
    assert api.get(f"/v1/conversations/{conversation_id}/handoff").json()["actions"][0]["operation_id"] == op

    event = {"type": "channel_opened", "channel": "voice"}
    reopened = api.post(f"/v1/conversations/{conversation_id}/events", json=event)
    assert reopened.status_code == 202, reopened.text
    handoff = api.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op]
    assert handoff["channels"]["voice"] == "open"

    await _terminate(stack, conversation_workflow_id(None, conversation_id))
    later = new_id()
    create(api, "room_booking", BOOKING, operation_id=later, conversation_id=conversation_id, wait=5)
    handoff = api.get(f"/v1/conversations/{conversation_id}/handoff").json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op, later]
    assert handoff["work"] == "waiting_for_user"
