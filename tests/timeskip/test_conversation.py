"""A conversation over days: it continues as new mid-flight with its channels, actions, stream and
handoff intact; the state it keeps (and carries into its next run) stays within its byte bound
however large the actions' params are; it closes an hour after its call, and reopens with what it kept."""

from datetime import timedelta
from typing import Any

import pytest
from settled.bench.actions import Billed, billed_in_events
from settled.gateway.gateway import Gateway
from settled.workflows.conversation import EVENT_LOG_MAX_BYTES, ConversationWorkflow
from settled.workflows.messages import CURRENT_REVISION, ActionChanged, ConversationStart
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    WorkflowExecutionStatus,
)

from settled.domain.models import ActionStatus, ConversationEventBody
from settled.runtime.config import Settings
from settled.temporal.identity import TASK_QUEUE, conversation_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

HOUR = timedelta(hours=1)


class _CountedQueries(Interceptor, OutboundInterceptor):
    """A client interceptor that notes every query the client sends (each a billed Temporal Action)."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        OutboundInterceptor.__init__(self, next)
        return self

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        self.queries.append(input.query)
        return await super().query_workflow(input)


def _counting(harness: Harness) -> tuple[Gateway, _CountedQueries]:
    """A gateway like the API's, on a client of the same server that counts its queries."""
    counted = _CountedQueries()
    client = Client(
        harness.env.client.service_client,
        namespace=harness.env.client.namespace,
        data_converter=harness.env.client.data_converter,
        interceptors=[counted],
    )
    return Gateway(client, harness.kinds, Settings()), counted


BOOKING = {"room": "Ada", "day": "Thursday"}
REFUND = {"order_id": "o-9", "amount": 3.0, "currency": "EUR"}


async def _create(harness: Harness, conversation_id: str, kind: str, params: dict[str, Any], **extra: Any):
    body = {"conversation_id": conversation_id, "kind": kind, "params": params, "operation_id": new_id()}
    response = await harness.api.post("/v1/actions", json={**body, **extra}, params={"wait": 5})
    assert response.status_code == 201, response.text
    return response.json()


async def _event(harness: Harness, conversation_id: str, **event: Any) -> dict[str, Any]:
    response = await harness.api.post(f"/v1/conversations/{conversation_id}/events", json=event)
    assert response.status_code == 202, response.text
    return dict(response.json())


async def _handoff(harness: Harness, conversation_id: str) -> dict[str, Any]:
    response = await harness.api.get(f"/v1/conversations/{conversation_id}/handoff")
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.continue_as_new_after(30)
async def test_a_conversation_continues_as_new_mid_flight_with_everything_intact(harness: Harness) -> None:
    conversation_id = new_id("conv")
    workflow_id = conversation_workflow_id(None, conversation_id)
    waiting = await _create(harness, conversation_id, "room_booking", BOOKING)
    refund = await _create(harness, conversation_id, "refund", REFUND)
    assert (waiting["state"], refund["state"]) == ("requested", "confirmed")
    await _event(harness, conversation_id, type="channel_opened", channel="voice")
    await _event(harness, conversation_id, type="channel_closed", channel="text", reason="hangup")
    presented = {"channel": "voice", "text": "Half done.", "completed": False}
    response = await harness.api.post(f"/v1/actions/{refund['operation_id']}/presented", json=presented)
    assert response.status_code == 200
    opening = await harness.stream(conversation_id, None, lambda items: len(items) == 2)
    assert [item["status"]["operation_id"] for item in opening] == [
        waiting["operation_id"],
        refund["operation_id"],
    ]

    # Channel events (each one recorded by the conversation) until it continues as new.
    for _ in range(40):
        await _event(harness, conversation_id, type="channel_opened", channel="voice")
        if len(await harness.conversation_runs(conversation_id)) >= 2:
            break
    runs = await harness.conversation_runs(conversation_id)
    assert len(runs) >= 2, "the conversation did not continue as new"
    carried = runs[-1].events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert ConversationStart.model_validate_json(carried.data).continue_as_new_after == 30

    handoff = await _handoff(harness, conversation_id)
    assert handoff["work"] == "waiting_for_user"
    assert handoff["channels"] == {"voice": "open", "text": "closed"}
    assert handoff["channel_reasons"] == {"text": "hangup"}
    assert [action["operation_id"] for action in handoff["actions"]] == [
        waiting["operation_id"],
        refund["operation_id"],
    ]
    # The handoff re-delivers the refund: its presentation never completed.
    assert refund["say"] in handoff["say"]

    # The waiting booking is authorized in the new run; the stream's log goes on where it was.
    authorized = await harness.api.post(
        f"/v1/actions/{waiting['operation_id']}/authorize", json={"by": "caller"}, params={"wait": 5}
    )
    assert authorized.status_code == 200 and authorized.json()["state"] == "confirmed", authorized.text
    assert [record["id"] for record in await harness.truth.records(waiting["operation_id"])] == [
        authorized.json()["business_ref"]
    ]

    # A stream client back from its opening's id, in the new run: the booking's changes, nothing else.
    def confirmed(items: list[dict[str, Any]]) -> bool:
        return items[-1]["status"]["state"] == "confirmed" and items[-1]["status"]["kind"] == "room_booking"

    after = await harness.stream(conversation_id, opening[-1]["id"], confirmed)
    assert {item["status"]["operation_id"] for item in after} == {waiting["operation_id"]}
    assert after[-1]["status"]["business_ref"] == authorized.json()["business_ref"]
    assert (await _handoff(harness, conversation_id))["work"] == "stopped"

    # Both actions close after their open week; the conversation an hour after its last change (it is
    # closed by then, and a read of its handoff reopens nothing).
    await harness.skip(32 * DAY)

    async def closed() -> bool:
        description = await harness.env.client.get_workflow_handle(workflow_id).describe()
        return description.status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, what="the conversation to close")
    assert len((await _handoff(harness, conversation_id))["actions"]) == 2
    runs = await harness.conversation_runs(conversation_id)
    await harness.replay(runs)


@pytest.mark.continue_as_new_after(100)
async def test_the_conversation_keeps_its_state_within_its_byte_bound_with_large_params(
    harness: Harness,
) -> None:
    """Each snapshot of these refunds is about 50 KB; 16 refunds are 48 snapshots, 2.4 MB: more than
    Temporal accepts as one payload (2 MB), which the state would be when it continues as new. The
    snapshots reach the conversation's log as an action of an earlier release sends them (three
    changes each); the refunds of this release are followed in their own histories."""
    conversation_id = new_id("conv")
    conversation = harness.env.client.get_workflow_handle(conversation_workflow_id(None, conversation_id))
    note = "x" * 50_000
    ops = []
    for index in range(16):
        params = {**REFUND, "order_id": f"o-{index}", "note": note}
        ops.append((await _create(harness, conversation_id, "refund", params))["operation_id"])
        status = ActionStatus.model_validate(await harness.status(ops[-1]))
        await conversation.signal("action_changed", ActionChanged(statuses=[status] * 3))

    # Queried only once the conversation is quiet, so a query cannot meet its continue-as-new.
    await harness.wait_quiet(conversation_id, ops)
    page = await conversation.query(ConversationWorkflow.events_since, 0)
    assert page is not None and page.events[-1].status.operation_id == ops[-1]
    assert page.truncated and page.events[0].seq > 1, "the oldest snapshots were not dropped"
    assert sum(len(event.model_dump_json()) for event in page.events) <= EVENT_LOG_MAX_BYTES
    assert page.events[-1].status.params["note"] == note  # the newest snapshots are whole

    # The conversation continues as new with that state, and its handoff still has every refund.
    for _ in range(40):
        if len(await harness.conversation_runs(conversation_id)) >= 2:
            break
        await _event(harness, conversation_id, type="interrupted", channel="voice")
    await harness.wait_quiet(conversation_id, ops)
    runs = await harness.conversation_runs(conversation_id)
    assert len(runs) >= 2, "the conversation did not continue as new"
    started = runs[-1].events[0].workflow_execution_started_event_attributes
    assert started.input.ByteSize() < 2 * 1024 * 1024
    handoff = await _handoff(harness, conversation_id)
    assert [action["operation_id"] for action in handoff["actions"]] == ops
    assert all(action["params"]["note"] == note for action in handoff["actions"])


async def test_a_conversation_closes_an_hour_after_its_call_and_reopens_with_what_it_kept(
    harness: Harness,
) -> None:
    """The default idle period (`SETTLED_CONVERSATION_IDLE_S`, an hour): a call's conversation closes an
    hour after its last event, for the Actions of its open run alone; a handoff read later lists every
    action with what was heard, and a channel that comes back reopens it with the same handoff and a
    stream that resumes where its client stood."""
    conversation_id = new_id("conv")
    workflow_id = conversation_workflow_id(None, conversation_id)
    await _event(harness, conversation_id, type="channel_opened", channel="voice")
    refund = await _create(harness, conversation_id, "refund", REFUND)
    waiting = await _create(harness, conversation_id, "room_booking", BOOKING)
    assert (refund["state"], waiting["state"]) == ("confirmed", "requested")
    heard = {"channel": "voice", "text": refund["say"], "completed": True}
    response = await harness.api.post(f"/v1/actions/{refund['operation_id']}/presented", json=heard)
    assert response.status_code == 200, response.text
    await _event(harness, conversation_id, type="channel_closed", channel="voice", reason="hangup")
    during = await _handoff(harness, conversation_id)
    # The handoff is read from the conversation's history: no query, running or closed.
    gateway, counted = _counting(harness)
    assert (await gateway.handoff(None, conversation_id)).model_dump(mode="json") == during
    opening = await harness.stream(conversation_id, None, lambda items: len(items) == 2)
    started = (await harness.conversation_runs(conversation_id))[-1].events[0]
    carried = started.workflow_execution_started_event_attributes.input.payloads[0]
    assert ConversationStart.model_validate_json(carried.data).idle_close_after_s == HOUR.total_seconds()

    # Open for its idle hour, then closed: the refund's week and the booking's wait keep only themselves.
    await harness.skip(HOUR / 2)
    conversation = harness.env.client.get_workflow_handle(workflow_id)
    assert (await conversation.describe()).status is WorkflowExecutionStatus.RUNNING
    await harness.skip(HOUR)

    async def closed() -> bool:
        return (await conversation.describe()).status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, what="the conversation to close an hour after its call")
    [first] = await harness.conversation_runs(conversation_id)
    # Its start (with the channel's opening), the two actions told, the closing, its idle timer and the
    # one that moved it to an hour after the last event: nothing per action but `track_action`.
    assert billed_in_events(first.events).counts == {
        **Billed.none().counts,
        "workflow started": 1,
        "signal": 2,
        "update": 2,
        "timer": 2,
    }

    # A handoff read after the close: every action, what was heard, nothing reopened.
    later = await _handoff(harness, conversation_id)
    assert later == during
    assert [action["operation_id"] for action in later["actions"]] == [
        refund["operation_id"],
        waiting["operation_id"],
    ]
    assert later["actions"][0]["presented"]["completed"] is True
    assert refund["say"] not in later["say"]  # heard: not said again
    assert later["work"] == "waiting_for_user" and later["channels"]["voice"] == "closed"
    assert len(await harness.conversation_runs(conversation_id)) == 1
    assert (await gateway.handoff(None, conversation_id)).model_dump(mode="json") == later

    # The text channel comes back: the conversation reopens with what it kept (read from the closed
    # run's history: no query), and the same handoff.
    opened = ConversationEventBody(type="channel_opened", channel="text")
    assert await gateway.conversation_event(None, conversation_id, opened) == []
    reopened = await _handoff(harness, conversation_id)
    assert reopened["actions"] == later["actions"]
    assert reopened["channels"] == {"voice": "closed", "text": "open"}
    assert counted.queries == []
    await gateway.client.get_workflow_handle(workflow_id).query(ConversationWorkflow.view)
    assert counted.queries == ["view"]  # the count does see a query
    second = await conversation.fetch_history()
    assert second.run_id != first.run_id
    # The reopening is a start of its own (the closed run's state is read by one query, not recorded).
    assert billed_in_events(second.events).counts["workflow started"] == 1

    # The booking is authorized in the reopened run; a stream client back from before the close gets
    # the booking's changes, nothing else.
    authorized = await harness.api.post(
        f"/v1/actions/{waiting['operation_id']}/authorize", json={"by": "caller"}, params={"wait": 5}
    )
    assert authorized.status_code == 200 and authorized.json()["state"] == "confirmed", authorized.text

    def confirmed(items: list[dict[str, Any]]) -> bool:
        return items[-1]["status"]["state"] == "confirmed"

    after = await harness.stream(conversation_id, opening[-1]["id"], confirmed)
    assert {item["status"]["operation_id"] for item in after} == {waiting["operation_id"]}
    await harness.replay([first, second])


async def test_a_conversation_started_before_its_start_carried_a_period_keeps_its_30_days(
    harness: Harness,
) -> None:
    """A run whose start names no idle period (started by an earlier release) keeps the workflow's own
    30 days, whatever the API is configured with now."""
    conversation_id = new_id("conv")
    start = ConversationStart(tenant=None, conversation_id=conversation_id, revision=CURRENT_REVISION)
    assert start.idle_close_after_s is None
    handle = await harness.env.client.start_workflow(
        ConversationWorkflow.run,
        start,
        id=conversation_workflow_id(None, conversation_id),
        task_queue=TASK_QUEUE,
        start_signal="track_action",
        start_signal_args=[new_id()],
    )
    await _event(harness, conversation_id, type="channel_closed", channel="voice")
    await harness.skip(2 * DAY)
    assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING
    await harness.skip(30 * DAY)

    async def closed() -> bool:
        return (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, what="the conversation to close after its 30 days")
