"""Replay the golden histories against the current code: a change that breaks running workflows fails.

No server is needed: the Replayer runs the workflow code against each recorded history.
"""

import base64
import importlib
import json
import sys
from pathlib import Path

import pytest
from settled.workflows.hosting import WORKFLOWS, workflow_runner
from settled.workflows.messages import ActionStart
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from settled.domain.machine import ActionRecord
from tests.golden.histories import states_written

GOLDEN = Path(__file__).parent.parent / "golden"
HISTORIES = sorted(GOLDEN.glob("*.json"))


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def replayer(workflows: list[type]) -> Replayer:
    return Replayer(
        workflows=workflows,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
        # No 2 s deadlock detection: on a busy machine a task may take longer, and a replay's verdict
        # is about the commands, not the machine's speed (the sandbox still refuses clocks and I/O).
        debug_mode=True,
    )


def test_there_are_golden_histories_of_both_workflows() -> None:
    names = {path.stem for path in HISTORIES}
    assert "golden-conversation" in names and len(names) >= 5


@pytest.mark.parametrize("path", HISTORIES, ids=lambda path: path.stem)
async def test_golden_history_replays_against_the_current_code(path: Path) -> None:
    await replayer(WORKFLOWS).replay_workflow(history(path))


async def test_a_changed_command_sequence_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the Action workflow that sleeps before each send: replay must call it non-deterministic."""
    source = (Path(__file__).parents[2] / "workflows" / "action.py").read_text()
    marker = "        record.begin_dispatch(workflow.now())\n"
    assert marker in source
    changed = source.replace(marker, marker + "        await workflow.sleep(1)\n")
    (tmp_path / "action_changed.py").write_text(changed)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("action_changed")
    try:
        changed_workflows = [module.ActionWorkflow, *WORKFLOWS[1:]]
        with pytest.raises(Exception, match=r"(?i)nondetermin"):
            await replayer(changed_workflows).replay_workflow(history(GOLDEN / "golden-normal.json"))
    finally:
        sys.modules.pop("action_changed", None)


async def test_a_forbidden_call_is_caught_by_the_sandboxed_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker runs workflow code outside Temporal's sandbox; the replays here run it inside, and
    a copy of the Action workflow that reads the wall clock before each send must fail them."""
    source = (Path(__file__).parents[2] / "workflows" / "action.py").read_text()
    marker = "        record.begin_dispatch(workflow.now())\n"
    assert marker in source
    changed = source.replace(marker, "        __import__('datetime').datetime.now()\n" + marker)
    (tmp_path / "action_clock.py").write_text(changed)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("action_clock")
    try:
        with pytest.raises(Exception, match=r"datetime\.now|restricted"):
            await replayer([module.ActionWorkflow, *WORKFLOWS[1:]]).replay_workflow(
                history(GOLDEN / "golden6-normal.json")
            )
    finally:
        sys.modules.pop("action_clock", None)


def test_the_newest_histories_cover_calls_inside_the_workflow_task() -> None:
    """The golden2 generation was recorded after the in-task patch: its send and its lookup ran as
    local activities, so their replay checks that path, and the golden- generation the one before."""
    for name in ("golden2-lost-in-task", "golden2-lookup-in-task"):
        assert "core_local_activity" in (GOLDEN / f"{name}.json").read_text()
    assert "core_local_activity" not in (GOLDEN / "golden-lost.json").read_text()


def _patches(name: str) -> set[str]:
    """The patch ids a history's markers carry."""
    events = json.loads((GOLDEN / f"{name}.json").read_text())["events"]
    details = [event.get("markerRecordedEventAttributes", {}).get("details", {}) for event in events]
    data = [base64.b64decode(d["patch-data"]["payloads"][0]["data"]) for d in details if "patch-data" in d]
    return {json.loads(raw)["id"] for raw in data}


def test_both_sides_of_the_commit_horizon_patch_are_replayed() -> None:
    """The same early 404 of a service without deduplication: re-sent at once by a run recorded before
    the commit horizon (its replay must keep doing so), held until the horizon by one after it."""
    assert "commit-horizon" not in _patches("golden2-early-404")
    assert "commit-horizon" in _patches("golden3-early-404")
    assert "commit-horizon" not in _patches("golden3-normal")  # asked only where the rule decides


def test_runs_of_the_current_revision_take_the_patched_paths_without_markers() -> None:
    """golden4 runs were started at the current revision: they take every patched path (a send inside
    the task, the commit horizon, one idle timer) without recording a marker; golden3 runs asked and
    recorded them. Both generations replay above, so each run keeps the path it took."""
    assert "in-task-business-calls" in _patches("golden3-normal")
    assert "one-idle-timer" in _patches("golden3-conversation")
    for name in ("golden4-normal", "golden4-early-404", "golden4-lost-in-task", "golden4-conversation"):
        assert _patches(name) == set(), name
    assert "core_local_activity" in (GOLDEN / "golden4-lost-in-task.json").read_text()
    # The action was started by a plain start that carries its creating call's wait (no update).
    normal = json.loads((GOLDEN / "golden4-normal.json").read_text())["events"]
    started = normal[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    start = json.loads(base64.b64decode(started))
    assert start["revision"] >= 2 and start["creating_wait_s"] is not None


def test_quiet_actions_do_not_signal_their_conversation_and_number_their_changes() -> None:
    """golden5 actions were started at QUIET_REVISION: no signal to the conversation, and each memo
    upsert carries the change number the stream resumes from; golden4 actions signalled each change.
    Both generations replay above."""

    def kinds(name: str) -> list[str]:
        return [event["eventType"] for event in json.loads((GOLDEN / f"{name}.json").read_text())["events"]]

    signal = "EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED"
    assert signal in kinds("golden4-normal")
    for name in ("golden5-normal", "golden5-lost", "golden5-resend", "golden5-cancel", "golden5-amend"):
        assert signal not in kinds(name), name
        assert "settled_version" in (GOLDEN / f"{name}.json").read_text(), name


def test_a_lazy_conversation_was_recorded_on_its_lazy_path() -> None:
    """golden6-lazy-conversation was started with a delay by a new action (LAZY_REVISION) and nothing
    woke it: its first task ran when the delay ran out, and knew it had been idle since its start (a
    moment's timer, then it closed); golden5-conversation, of the revision before, replays above too."""
    events = json.loads((GOLDEN / "golden6-lazy-conversation.json").read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]
    assert started["firstWorkflowTaskBackoff"] == "3s"
    assert [event["eventType"] for event in events[:3]] == [
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
        "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED",
        "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED",
    ]
    timers = [
        e["timerStartedEventAttributes"]["startToFireTimeout"]
        for e in events
        if "timerStartedEventAttributes" in e
    ]
    assert timers == ["1s"]
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"


def _activities(name: str) -> list[str]:
    """The business activities a history scheduled, in order (regular and in-task)."""
    scheduled = []
    for event in json.loads((GOLDEN / f"{name}.json").read_text())["events"]:
        if "activityTaskScheduledEventAttributes" in event:
            scheduled.append(event["activityTaskScheduledEventAttributes"]["activityType"]["name"])
        marker = event.get("markerRecordedEventAttributes")
        if marker and marker["markerName"] == "core_local_activity":
            data = marker["details"]["data"]["payloads"][0]["data"]
            scheduled.append(json.loads(base64.b64decode(data))["activity_type"])
    return scheduled


def test_a_lost_reversal_was_recorded_looked_up_not_resent() -> None:
    """golden7-reversal-lookup (SERVICES_REVISION): the compensation's answer was lost, and the run looked
    the booking up (finding it reversed) instead of sending the reversal again; its replay above keeps
    that path, and the runs of earlier revisions keep re-sending theirs."""
    activities = _activities("golden7-reversal-lookup")
    assert activities.count("compensate") == 1
    assert activities.index("compensate") < len(activities) - 1 and activities[-1] == "lookup"
    events = json.loads((GOLDEN / "golden7-reversal-lookup.json").read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(started))["revision"] >= 5


def test_an_accepted_payout_was_recorded_running_until_looked_up_final() -> None:
    activities = _activities("golden7-accepted")
    assert activities[0] == "dispatch" and activities.count("dispatch") == 1 and "lookup" in activities


def test_a_queued_send_was_recorded_taking_its_turn_before_it_left() -> None:
    """golden7-queued (SERVICES_REVISION): the send refused on the shared worker waited `requested` in its
    kind's queue, and the kind's worker recorded `sending` (an update) before the request left."""
    events = json.loads((GOLDEN / "golden7-queued.json").read_text())["events"]
    kinds = [event["eventType"].removeprefix("EVENT_TYPE_") for event in events]
    accepted = kinds.index("WORKFLOW_EXECUTION_UPDATE_ACCEPTED")
    completed = [i for i, kind in enumerate(kinds) if kind == "ACTIVITY_TASK_COMPLETED"]
    assert kinds.count("ACTIVITY_TASK_FAILED") == 1 and completed and accepted < completed[-1]
    update = events[accepted]["workflowExecutionUpdateAcceptedEventAttributes"]
    assert update["acceptedRequest"]["input"]["name"] == "sending"


def _event_kinds(name: str) -> list[str]:
    events = json.loads((GOLDEN / f"{name}.json").read_text())["events"]
    return [event["eventType"].removeprefix("EVENT_TYPE_") for event in events]


def test_a_queued_send_was_recorded_sending_when_its_worker_took_it_without_an_update() -> None:
    """golden8-queued (QUEUE_REVISION): the same refused send as golden7-queued, marked sending by
    Temporal's record that the kind's worker took it: no update, and one workflow task fewer."""
    before, after = _event_kinds("golden7-queued"), _event_kinds("golden8-queued")
    updates, tasks = "WORKFLOW_EXECUTION_UPDATE_ACCEPTED", "WORKFLOW_TASK_COMPLETED"
    assert (before.count(updates), before.count(tasks)) == (1, 4)
    assert (after.count(updates), after.count(tasks)) == (0, 3)
    assert after.count("ACTIVITY_TASK_FAILED") == 1 and after.count("ACTIVITY_TASK_COMPLETED") == 1


def test_queued_sends_taken_back_were_recorded_cancelled_before_any_worker_took_them() -> None:
    """golden8-queued-cancelled and -amended: a cancel and an amend took the queued send back. Temporal
    cancelled it before any worker took it (no start between its scheduling and its cancellation);
    the amended one was then sent with its new params."""
    for name in ("golden8-queued-cancelled", "golden8-queued-amended"):
        kinds = _event_kinds(name)
        cancelled = kinds.index("ACTIVITY_TASK_CANCELED")
        scheduled = max(i for i in range(cancelled) if kinds[i] == "ACTIVITY_TASK_SCHEDULED")
        assert "ACTIVITY_TASK_STARTED" not in kinds[scheduled:cancelled], name
    assert "ACTIVITY_TASK_COMPLETED" not in _event_kinds("golden8-queued-cancelled")
    assert _activities("golden8-queued-amended").count("dispatch") == 4  # refused, taken back, refused, sent


def test_lean_runs_keep_their_timer_and_write_only_the_states_operators_act_on() -> None:
    """golden9 runs (LEAN_REVISION): the `presented` after the go-ahead's confirmation starts no timer
    (golden8's re-armed the same deadline), the go-ahead writes its outcome alone (golden8's wrote the
    `running` that the send inside the same task had already answered), and a send by an activity
    keeps `requested` while in flight. Both generations replay above."""
    before, after = _event_kinds("golden8-normal"), _event_kinds("golden9-normal")
    assert (before.count("TIMER_STARTED"), before.count("TIMER_CANCELED")) == (2, 1)
    assert (after.count("TIMER_STARTED"), after.count("TIMER_CANCELED")) == (1, 0)
    assert after[-3:] == [
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
        "WORKFLOW_EXECUTION_UPDATE_COMPLETED",
        "WORKFLOW_PROPERTIES_MODIFIED",
    ]
    assert states_written("golden8-normal") == ["running", "confirmed"]
    assert states_written("golden9-normal") == ["confirmed"]
    assert states_written("golden8-lost") == ["running", "unknown", "confirmed"]
    assert states_written("golden9-lost") == ["unknown", "confirmed"]
    assert states_written("golden9-accepted")[0] == "running"  # accepted, not finished: shown
    events = json.loads((GOLDEN / "golden9-normal.json").read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(started))["revision"] >= 7


def test_a_settled_run_closed_with_its_record_and_a_late_cancel_opened_it_again() -> None:
    """golden10-lingered (CLOSING_REVISION): the booking's run settled, lingered and completed with its
    whole record; golden10-reopened, the run a late cancel started from that record (naming the run it
    was opened from), reversed the booking and completed again. golden8 and golden9 runs stayed open."""
    lingered = history(GOLDEN / "golden10-lingered.json")
    closed = lingered.events[-1].workflow_execution_completed_event_attributes
    [record] = pydantic_data_converter.payload_converter.from_payloads(closed.result.payloads, [ActionRecord])
    assert record.state.value == "confirmed" and record.closes_when_settled
    reopened = history(GOLDEN / "golden10-reopened.json")
    started = reopened.events[0].workflow_execution_started_event_attributes
    [start] = pydantic_data_converter.payload_converter.from_payloads(started.input.payloads, [ActionStart])
    assert start.reopens == lingered.run_id and start.carried is not None
    assert start.carried.version == record.version
    assert _activities("golden10-reopened") == ["compensate"]
    assert _event_kinds("golden10-reopened")[-1] == "WORKFLOW_EXECUTION_COMPLETED"
    assert "WORKFLOW_EXECUTION_COMPLETED" not in _event_kinds("golden8-normal")


def _timers(name: str) -> list[str]:
    """How long each timer a history started was set for."""
    events = json.loads((GOLDEN / f"{name}.json").read_text())["events"]
    return [
        event["timerStartedEventAttributes"]["startToFireTimeout"]
        for event in events
        if event["eventType"] == "EVENT_TYPE_TIMER_STARTED"
    ]


def test_a_control_that_waits_starts_no_timer_since_the_closing_revision() -> None:
    """A cancel that waits 10 s for its outcome: golden9-queued-cancelled's update waited in the
    workflow (a 10 s timer, cancelled once the send was taken back); golden10's answered at once and
    its caller awaited the outcome in the history, so its one timer is the action's own deadline. The
    late cancel that opened golden10-reopened (waiting too) left only the linger's timer. Both
    generations replay above."""
    assert _timers("golden9-queued-cancelled") == ["10s", "3600s"]
    assert _timers("golden10-queued-cancelled") == ["3600s"]
    [linger] = _timers("golden10-reopened")
    assert float(linger.removesuffix("s")) <= 2.0
