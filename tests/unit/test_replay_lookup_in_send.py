"""The golden histories of a lost answer looked up in the send's own call (runs since LEAN_REVISION),
read beside those recorded before it (golden8): the replay of each is in tests/unit/test_replay.py.
The newest generation (the one tests/golden/record.py records) holds them."""

import base64
import json
import re
from typing import Any

from tests.golden.histories import GOLDEN, events, states_written

_RECORDED = re.search(r'^GENERATION = "(\w+)"$', (GOLDEN / "record.py").read_text(), re.MULTILINE)
assert _RECORDED is not None
NEWEST = _RECORDED.group(1)


def _decoded(payloads: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(payloads["payloads"][0]["data"]))


def _business_calls(name: str) -> list[tuple[str, dict[str, Any] | None]]:
    """Each business call a history made (regular or in-task), with its recorded result."""
    calls: list[tuple[str, dict[str, Any] | None]] = []
    scheduled: dict[str, str] = {}
    for event in events(name):
        if "activityTaskScheduledEventAttributes" in event:
            scheduled[event["eventId"]] = event["activityTaskScheduledEventAttributes"]["activityType"][
                "name"
            ]
        completed = event.get("activityTaskCompletedEventAttributes")
        if completed:
            calls.append((scheduled[completed["scheduledEventId"]], _decoded(completed["result"])))
        marker = event.get("markerRecordedEventAttributes")
        if marker and marker["markerName"] == "core_local_activity":
            details = marker["details"]
            activity = _decoded(details["data"])["activity_type"]
            calls.append((activity, _decoded(details["result"]) if "result" in details else None))
    return calls


def test_a_lost_answer_was_recorded_confirmed_by_the_lookup_in_its_own_call() -> None:
    """`-lost` (an activity) and `-lost-in-task` (inside the workflow task): one business call, whose
    result carries the lost send and the lookup that found it; `unknown` never written for operators.
    The runs of golden8 made two calls, the lookup after a backoff timer."""
    for scenario in ("lost", "lost-in-task"):
        name, before = f"{NEWEST}-{scenario}", f"golden8-{scenario}"
        [(activity, result)] = _business_calls(name)
        assert activity == "dispatch" and result is not None, name
        assert result["result"] == "unknown" and result["lookup"]["result"] == "applied", result
        assert "unknown" not in states_written(name)
        assert [activity for activity, _ in _business_calls(before)] == ["dispatch", "lookup"], before
        assert "unknown" in states_written(before)


def test_a_lookup_in_the_call_that_got_no_answer_was_recorded_unknown_then_looked_up_again() -> None:
    calls = _business_calls(f"{NEWEST}-lost-looked-up-later")
    assert [activity for activity, _ in calls] == ["dispatch", "lookup"]
    dispatched = calls[0][1]
    assert dispatched is not None and dispatched["lookup"]["result"] == "inconclusive"
    assert "unknown" in states_written(f"{NEWEST}-lost-looked-up-later")
