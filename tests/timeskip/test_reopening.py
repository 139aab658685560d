"""A settled action's run closes a minute after it settled; a late control within its window of late
controls (7 days) opens it again from the record the run closed with; past the window every route
answers as it always did. Days pass on the test server, and the sandbox's own records say what
reached the business service."""

import asyncio
from datetime import timedelta
from typing import Any

from settled.gateway.changes import closed_record
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from settled.temporal.identity import action_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

BOOKING = {"room": "Ada", "day": "Thursday"}
# Longer than the linger (a minute), well inside the window.
PAST_THE_LINGER = timedelta(minutes=2)


async def _describe(harness: Harness, op: str) -> WorkflowExecutionDescription:
    return await harness.env.client.get_workflow_handle(action_workflow_id(None, op)).describe()


async def _closed(harness: Harness, op: str) -> WorkflowExecutionDescription | None:
    described = await _describe(harness, op)
    return described if described.status is WorkflowExecutionStatus.COMPLETED else None


async def _book(harness: Harness, conversation_id: str, op: str) -> dict[str, Any]:
    body = {"conversation_id": conversation_id, "kind": "meeting_room", "params": BOOKING, "operation_id": op}
    response = await harness.api.post("/v1/actions", json=body, params={"wait": 5})
    assert response.status_code == 201 and response.json()["state"] == "confirmed", response.text
    return dict(response.json())


async def test_a_settled_action_closes_after_its_linger_with_its_whole_record(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    opened = await _describe(harness, op)
    assert opened.status is WorkflowExecutionStatus.RUNNING

    # The confirmation is spoken, and reported within the linger: recorded by the same run.
    await harness.skip(timedelta(seconds=20))
    said = {"channel": "voice", "text": booked["say"], "completed": True}
    presented = await harness.api.post(f"/v1/actions/{op}/presented", json=said)
    assert presented.status_code == 200 and presented.json()["presented"]["completed"] is True
    assert (await _describe(harness, op)).run_id == opened.run_id

    # 70 s after it settled: the report did not move the close deadline (a minute after settling).
    await harness.skip(timedelta(seconds=50))
    closed = await eventually(lambda: _closed(harness, op), what="the action's run to close")
    assert closed.run_id == opened.run_id
    assert closed.close_time is not None and closed.start_time is not None
    assert closed.close_time - closed.start_time < timedelta(seconds=90)
    (history,) = await harness.action_runs(op)
    assert sum(event.ByteSize() for event in history.events) < 20_000

    # The run ended with the whole record; reads answer from its memo as before.
    record = await closed_record(harness.env.client, action_workflow_id(None, op), closed.run_id)
    assert record is not None and record.operation_id == op and record.business_ref == booked["business_ref"]
    status = await harness.status(op)
    assert status["state"] == "confirmed" and status["presented"]["text"] == booked["say"]
    handoff = (await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op]
    assert handoff["say"] == ""  # what was heard stays recorded


async def test_a_cancel_on_day_6_opens_the_action_again_and_reverses_the_booking(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    await harness.skip(6 * DAY)
    closed = await eventually(lambda: _closed(harness, op), what="the action's run to close")
    [opening] = await harness.stream(conversation_id, None, lambda items: True)
    assert opening["status"]["state"] == "confirmed"

    def cancelled(items: list[dict[str, Any]]) -> bool:
        return items[-1]["status"]["state"] == "cancelled"

    # A stream reader that came before the cancel gets what the reopened run records.
    following = asyncio.ensure_future(harness.stream(conversation_id, opening["id"], cancelled))
    answer = await harness.api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 10})
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "cancelled" and answer.json()["compensated"] is True, answer.text
    assert answer.json()["business_ref"] == booked["business_ref"]
    # The service's own records: the booking was reversed, once.
    [row] = await harness.truth.records(op)
    assert row["id"] == booked["business_ref"] and row["cancelled_at"] is not None, row
    assert len(await harness.truth.requests(op, "cancel")) == 1

    reopened = await _describe(harness, op)
    assert reopened.run_id != closed.run_id
    await harness.skip(PAST_THE_LINGER)
    again = await eventually(lambda: _closed(harness, op), what="the reopened run to close")
    assert again.run_id == reopened.run_id
    # (The test server answers a long poll of a run's history only once the run closes.)
    streamed = await following
    assert streamed[-1]["status"]["compensated"] is True
    status = await harness.status(op)
    assert (status["state"], status["compensated"]) == ("cancelled", True)
    # A cancel of what is cancelled changes nothing, and opens nothing.
    repeat = await harness.api.post(f"/v1/actions/{op}/cancel", json={})
    assert repeat.status_code == 200 and repeat.json()["state"] == "cancelled", repeat.text
    assert (await _describe(harness, op)).run_id == reopened.run_id
    assert len(await harness.truth.requests(op, "cancel")) == 1


async def test_a_presented_on_day_6_is_recorded_and_after_day_7_every_route_answers_as_before(
    harness: Harness,
) -> None:
    conversation_id, op = new_id("conv"), new_id()
    booked = await _book(harness, conversation_id, op)
    await harness.skip(6 * DAY)
    first = await eventually(lambda: _closed(harness, op), what="the action's run to close")

    said = {"channel": "text", "text": "Your room is booked.", "completed": True}
    presented = await harness.api.post(f"/v1/actions/{op}/presented", json=said)
    assert presented.status_code == 200 and presented.json()["presented"]["text"] == said["text"]
    second = await _describe(harness, op)
    assert second.run_id != first.run_id
    await harness.skip(PAST_THE_LINGER)
    await eventually(lambda: _closed(harness, op), what="the reopened run to close")
    assert (await harness.status(op))["presented"]["text"] == said["text"]

    # A repeat create is answered from the record the run closed with, and opens nothing.
    same = {"conversation_id": conversation_id, "kind": "meeting_room", "params": BOOKING, "operation_id": op}
    repeat = await harness.api.post("/v1/actions", json=same)
    assert repeat.status_code == 200 and repeat.json()["business_ref"] == booked["business_ref"], repeat.text
    other = await harness.api.post("/v1/actions", json={**same, "params": {"room": "Bo", "day": "Friday"}})
    assert (other.status_code, other.json()["error"]["code"]) == (409, "operation_conflict"), other.text
    assert (await _describe(harness, op)).run_id == second.run_id

    # Past the window (7 days after it settled): the answers of a closed action, and no new run.
    await harness.skip(DAY + timedelta(hours=1))
    api = harness.api
    for route, body, code in (
        ("cancel", {}, "cannot_cancel"),
        ("presented", said, "not_amendable"),
        ("amend", {"params": {"room": "Bo", "day": "Friday"}}, "not_amendable"),
    ):
        answer = await api.post(f"/v1/actions/{op}/{route}", json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, code), (route, answer.text)
    assert (await api.post(f"/v1/actions/{op}/authorize", json={})).json()["state"] == "confirmed"
    assert (await api.post(f"/v1/actions/{op}/reconcile")).json()["state"] == "confirmed"
    repeat = await api.post("/v1/actions", json=same)
    assert repeat.status_code == 200 and repeat.json()["business_ref"] == booked["business_ref"], repeat.text
    assert (await _describe(harness, op)).run_id == second.run_id
    assert await harness.truth.requests(op, "cancel") == []


async def test_a_late_control_the_record_refuses_opens_nothing(harness: Harness) -> None:
    conversation_id, op = new_id("conv"), new_id()
    body = {"conversation_id": conversation_id, "kind": "refund", "operation_id": op, "authorized": True}
    body["params"] = {"order_id": "o-1", "amount": 5, "currency": "EUR"}
    created = await harness.api.post("/v1/actions", json=body, params={"wait": 5})
    assert created.json()["state"] == "confirmed", created.text
    await harness.skip(3 * DAY)
    closed = await eventually(lambda: _closed(harness, op), what="the action's run to close")

    api = harness.api
    refused = await api.post(f"/v1/actions/{op}/cancel", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "cannot_cancel"), refused.text
    assert "cannot be reversed" in refused.json()["error"]["message"]  # the record's own words
    amended = await api.post(f"/v1/actions/{op}/amend", json={"params": {**body["params"], "amount": 6}})
    assert (amended.status_code, amended.json()["error"]["code"]) == (409, "not_amendable"), amended.text
    assert (await api.post(f"/v1/actions/{op}/authorize", json={})).json()["state"] == "confirmed"
    assert (await api.post(f"/v1/actions/{op}/reconcile")).json()["state"] == "confirmed"
    assert (await _describe(harness, op)).run_id == closed.run_id
