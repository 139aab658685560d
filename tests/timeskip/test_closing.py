"""A settled action stays open for its keep-open period (7 days), then closes; a conversation closes
after 30 idle days. What every route answers afterwards."""

from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from settled.temporal.identity import action_workflow_id, conversation_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

BOOKING = {"room": "Ada", "day": "Thursday"}


async def _workflow_status(harness: Harness, workflow_id: str) -> WorkflowExecutionStatus | None:
    return (await harness.env.client.get_workflow_handle(workflow_id).describe()).status


async def _closed(harness: Harness, workflow_id: str) -> bool:
    return await _workflow_status(harness, workflow_id) is WorkflowExecutionStatus.COMPLETED


async def _book(harness: Harness, conversation_id: str, operation_id: str) -> dict:
    body = {
        "conversation_id": conversation_id,
        "kind": "room_booking",
        "params": BOOKING,
        "operation_id": operation_id,
        "authorized": True,
    }
    response = await harness.api.post("/v1/actions", json=body, params={"wait": 5})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_settled_action_stays_open_for_its_keep_open_period_then_closes(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    assert booked["state"] == "confirmed" and booked["business_ref"]
    workflow_id = action_workflow_id(None, op)
    # The caller waited: the send ran inside the workflow task (a local activity).
    (run,) = await harness.action_runs(op)
    markers = [
        e.marker_recorded_event_attributes.marker_name
        for e in run.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert "core_local_activity" in markers

    await harness.skip(7 * DAY - timedelta(hours=1))
    # Still open: a presentation is recorded on the action itself.
    presented = await harness.api.post(
        f"/v1/actions/{op}/presented", json={"channel": "voice", "text": "It is booked.", "completed": True}
    )
    assert presented.status_code == 200 and presented.json()["presented"]["completed"] is True
    assert await _workflow_status(harness, workflow_id) is WorkflowExecutionStatus.RUNNING

    await harness.skip(timedelta(hours=2))
    await eventually(lambda: _closed(harness, workflow_id), what="the action's workflow to close")
    status = await harness.status(op)
    assert status["state"] == "confirmed" and status["business_ref"] == booked["business_ref"]
    assert status["presented"]["text"] == "It is booked."
    records = await harness.truth.records(op)
    assert [(r["id"], r["cancelled_at"]) for r in records] == [(booked["business_ref"], None)], records


async def test_every_action_route_answers_a_closed_action_by_its_record(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    await harness.skip(8 * DAY)
    await eventually(lambda: _closed(harness, action_workflow_id(None, op)), what="the action to close")
    api = harness.api

    got = await api.get(f"/v1/actions/{op}")
    assert got.status_code == 200 and got.json()["state"] == "confirmed"
    same = {"conversation_id": conversation_id, "kind": "room_booking", "params": BOOKING, "operation_id": op}
    repeat = await api.post("/v1/actions", json=same)
    assert repeat.status_code == 200, repeat.text
    assert repeat.json()["business_ref"] == booked["business_ref"]
    other = await api.post("/v1/actions", json={**same, "params": {"room": "Bo", "day": "Friday"}})
    assert (other.status_code, other.json()["error"]["code"]) == (409, "operation_conflict"), other.text
    # From another conversation, even with its kind and params: refused, with nothing of the action.
    elsewhere = await api.post("/v1/actions", json={**same, "conversation_id": new_id("conv")})
    assert (elsewhere.status_code, elsewhere.json()["error"]["code"]) == (409, "operation_conflict")
    assert booked["business_ref"] not in elsewhere.text and conversation_id not in elsewhere.text

    authorized = await api.post(f"/v1/actions/{op}/authorize", json={})
    assert authorized.status_code == 200 and authorized.json()["state"] == "confirmed", authorized.text
    reconciled = await api.post(f"/v1/actions/{op}/reconcile")
    assert reconciled.status_code == 200 and reconciled.json()["state"] == "confirmed", reconciled.text
    for route, body, code in (
        ("amend", {"params": {"room": "Bo", "day": "Friday"}}, "not_amendable"),
        ("cancel", {}, "cannot_cancel"),
        ("presented", {"channel": "text", "text": "Booked.", "completed": True}, "not_amendable"),
    ):
        answer = await api.post(f"/v1/actions/{op}/{route}", json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, code), (route, answer.text)

    missing = await api.post(f"/v1/actions/{new_id()}/cancel", json={})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found"), missing.text
    # Nothing reached the business system after the action closed: one write, no reversal.
    assert len(await harness.truth.writes(op)) == 1
    assert await harness.truth.requests(op, "cancel") == []
    assert [(r["id"], r["cancelled_at"]) for r in await harness.truth.records(op)] == [
        (booked["business_ref"], None)
    ]


async def test_an_idle_conversation_closes_after_its_idle_hour_and_its_handoff_still_answers(
    harness: Harness,
) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    presented = {"channel": "voice", "text": booked["say"], "completed": True}
    assert (await harness.api.post(f"/v1/actions/{op}/presented", json=presented)).status_code == 200
    closed = await harness.api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "channel_closed", "channel": "voice"}
    )
    assert closed.status_code == 202, closed.text
    workflow_id = conversation_workflow_id(None, conversation_id)

    # Idle from its own last event (the channel closing; its actions' changes are theirs): an hour on
    # (`SETTLED_CONVERSATION_IDLE_S`), it closes.
    await harness.skip(timedelta(minutes=50))
    assert await _workflow_status(harness, workflow_id) is WorkflowExecutionStatus.RUNNING
    await harness.skip(timedelta(minutes=20))
    await eventually(lambda: _closed(harness, workflow_id), what="the conversation to close")

    handoff = await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")
    assert handoff.status_code == 200, handoff.text
    body = handoff.json()
    assert body["work"] == "stopped" and body["say"] == ""
    assert body["channels"]["voice"] == "closed"
    assert [action["operation_id"] for action in body["actions"]] == [op]
    assert body["actions"][0]["business_ref"] == booked["business_ref"]
    # The stream starts from the closed conversation's state.
    [opening] = await harness.stream(conversation_id, None, lambda items: True)
    assert opening["status"]["operation_id"] == op and opening["id"].startswith("@")

    # A channel comes back: the conversation reopens with what it kept, and goes on from there.
    reopened = await harness.api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "channel_opened", "channel": "text"}
    )
    assert reopened.status_code == 202 and reopened.json()["reconciling"] == [], reopened.text
    again = await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")
    assert again.json()["channels"] == {"voice": "closed", "text": "open"}
    assert [action["operation_id"] for action in again.json()["actions"]] == [op]
    later = new_id()
    await _book(harness, conversation_id, later)
    handoff = (await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op, later]

    # A client back from the opening's id gets the new booking's changes, and nothing of the first.
    def confirmed(items: list[dict[str, Any]]) -> bool:
        return items[-1]["status"]["operation_id"] == later and items[-1]["status"]["state"] == "confirmed"

    after = await harness.stream(conversation_id, opening["id"], confirmed)
    assert {item["status"]["operation_id"] for item in after} == {later}


async def is_disconnected(self) -> bool:
    return True


async def test_a_new_action_in_a_closed_conversation_reopens_it_with_what_it_kept(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    await _book(harness, conversation_id, op)
    await harness.skip(32 * DAY)
    workflow_id = conversation_workflow_id(None, conversation_id)
    await eventually(lambda: _closed(harness, workflow_id), what="the conversation to close")
    later = new_id()
    await _book(harness, conversation_id, later)
    handoff = (await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op, later]
    assert handoff["work"] == "stopped"
