"""Continue-as-new mid-flight: an action and its conversation continue as new while the action is
unverified; once retention redacted the settled action's params its run closes (the conversation never
holds them), a late presentation opens it again from the redacted record, and every later run is as
good as the first (state, handoff, stream, presentations, a cancel that compensates), and no run
started after the redaction holds the redacted values anywhere in its history.

The workflows continue as new after a lowered number of history events (the gateway's
`continue_as_new_after`), so a handful of lookups and controls are enough."""

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory

from settled.temporal.identity import action_workflow_id
from tests.client.support import eventually, new_id
from tests.timeskip.support import DAY, Harness

EVENTS_PER_RUN = 40


async def _runs(harness: Harness, workflow_id: str) -> int:
    return len(await harness.runs(workflow_id))


async def _until(harness: Harness, op: str, check: Any, what: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        current = await harness.status(op)
        return current if check(current) else None

    return await eventually(probe, what=what)


@pytest.mark.continue_as_new_after(EVENTS_PER_RUN)
@pytest.mark.parametrize("harness", [False, True], ids=["plain", "encrypted"], indirect=True)
async def test_an_action_and_its_conversation_continue_as_new_mid_flight_and_after_redaction(
    harness: Harness,
) -> None:
    conversation_id, op = new_id("conv"), new_id()
    # Values found nowhere else, so any trace of them in a history is theirs.
    booking = {"room": f"room-{uuid.uuid4().hex}", "day": f"day-{uuid.uuid4().hex}"}
    secrets = list(booking.values())
    action_id = action_workflow_id(None, op)
    api, truth = harness.api, harness.truth

    # The service fails every send (503) and every lookup: unverified, checked and re-sent (it
    # deduplicates) again and again.
    await truth.fault("bookings", "create", "fail_before_apply", op, count=0, status=503)
    await truth.fault("bookings", "lookup", "fail_before_apply", op, count=0, status=503)
    body = {"conversation_id": conversation_id, "kind": "room_booking", "params": booking}
    created = await api.post("/v1/actions", json={**body, "operation_id": op, "authorized": True})
    assert created.status_code == 201, created.text
    opened = await api.post(
        f"/v1/conversations/{conversation_id}/events", json={"type": "channel_opened", "channel": "voice"}
    )
    assert opened.status_code == 202, opened.text
    await harness.skip(timedelta(hours=2))
    assert await _runs(harness, action_id) >= 2, "the action did not continue as new"
    unverified = await harness.status(op)
    assert unverified["state"] == "unknown" and unverified["needs_attention"] is True
    handoff = (await api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
    assert handoff["work"] == "continuing" and handoff["channels"]["voice"] == "open"
    assert [action["state"] for action in handoff["actions"]] == ["unknown"]

    # The service answers again: a reconcile (in a later run) finds nothing applied, re-sends, and the
    # service confirms.
    await truth.clear_faults()
    answer = await api.post(f"/v1/actions/{op}/reconcile", params={"wait": 5})
    assert answer.status_code == 200, answer.text
    confirmed = await _until(harness, op, lambda s: s["state"] == "confirmed", "the confirmation")
    states = [entry["state"] for entry in confirmed["history"]]
    assert states[0] == "requested" and "unknown" in states and states[-1] == "confirmed"
    assert confirmed["business_ref"]
    presented = {"channel": "voice", "text": confirmed["say"], "completed": True}
    assert (await api.post(f"/v1/actions/{op}/presented", json=presented)).status_code == 200

    # A day later retention redacts the params (and the presented sentence, which quotes them), and
    # the settled action's run closes right then: no open run holds any of it. (The conversation never
    # held them: it keeps its actions' ids, not their snapshots.)
    runs_before_redaction = await _runs(harness, action_id)
    await harness.skip(DAY + timedelta(minutes=1))
    redacted = await _until(harness, op, lambda s: s["params"]["room"] == "[redacted]", "the redaction")
    assert redacted["presented"]["text"] == "[redacted]"

    async def continued(action_runs: int, conversation_runs: int) -> bool:
        return await _runs(harness, action_id) > action_runs and (
            len(await harness.conversation_runs(conversation_id)) > conversation_runs
        )

    async def closed() -> bool:
        described = await harness.env.client.get_workflow_handle(action_id).describe()
        return described.status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, what="the action's run to close")
    runs_after_redaction = await _runs(harness, action_id)
    assert runs_after_redaction == runs_before_redaction
    conversation_runs_after = len(await harness.conversation_runs(conversation_id))
    # A stream client back from the very start gets the action as it is now: no value it held.
    [resumed] = await harness.stream(conversation_id, "@0", lambda items: True)
    assert resumed["status"]["operation_id"] == op and resumed["status"]["params"]["room"] == "[redacted]"
    assert not any(secret in json.dumps(resumed) for secret in secrets)

    # Presentations and channel events keep coming: the first opens the action again (a new run, from
    # the redacted record), then both continue as new for their history's length.
    async def both_continued() -> bool:
        return await continued(runs_after_redaction, conversation_runs_after)

    later = {"channel": "text", "text": redacted["say"], "completed": True}
    opened = {"type": "channel_opened", "channel": "text"}
    for _ in range(60):
        assert (await api.post(f"/v1/actions/{op}/presented", json=later)).status_code == 200
        assert (await api.post(f"/v1/conversations/{conversation_id}/events", json=opened)).status_code == 202
        if await both_continued():
            break
    assert await both_continued(), "no run of the action and of the conversation started after the redaction"
    await harness.skip(timedelta(minutes=1))

    # Everything still works in the new run: the status, the handoff, a cancel that compensates.
    after = await harness.status(op)
    assert after["state"] == "confirmed" and after["business_ref"] == confirmed["business_ref"]
    assert after["presented"]["channel"] == "text" and after["history"] == confirmed["history"]
    handoff = (await api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
    assert handoff["work"] == "stopped" and handoff["say"] == ""
    cancelled = await api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 5})
    assert cancelled.status_code == 200, cancelled.text
    assert (cancelled.json()["state"], cancelled.json()["compensated"]) == ("cancelled", True)
    assert cancelled.json()["business_ref"] == confirmed["business_ref"]
    records = await truth.records(op)
    assert len(records) == 1 and records[0]["cancelled_at"] is not None, records

    # The histories. The first run holds the request itself (its input and the requests sent), so the
    # scan does see the values. From the run that the redaction started on, no run holds them
    # anywhere, in any event (the earlier ones are closed: the namespace's retention deletes them).
    redacted_at = datetime.fromisoformat(
        next(entry["at"] for entry in redacted["log"] if entry["event"] == "redacted")
    )
    action_runs = await harness.action_runs(op)
    conversation_runs = await harness.conversation_runs(conversation_id)
    await harness.replay([*action_runs, *conversation_runs])
    for label, runs in (("action", action_runs), ("conversation", conversation_runs)):
        holds = []
        for run in runs:
            texts = await harness.payload_texts(run)
            holds.append(any(secret in text for text in texts for secret in secrets))
        if label == "conversation":
            assert not any(holds), f"a conversation run holds the values: {holds}"
            continue
        assert holds[0], f"the scan did not find the values in the {label}'s first run"
        if harness.env.client.data_converter.payload_codec is not None:  # stored as ciphertext only
            assert not any(secret in str(run.events) for run in runs for secret in secrets)
        clean_from = holds.index(False)
        assert not any(holds[clean_from:]), f"a {label} run after a clean one holds the values: {holds}"
        assert len(runs) - clean_from >= 2, f"the {label} did not continue as new after the redaction"
        # The last run that holds them closed with the redaction.
        assert _closed(runs[clean_from - 1]) - redacted_at < timedelta(minutes=1), label


def _closed(run: WorkflowHistory) -> datetime:
    return run.events[-1].event_time.ToDatetime(tzinfo=UTC)
