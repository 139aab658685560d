"""The bulkheads' histories (tests/golden/bulkheads-*.json, `python -m tests.golden.record bulkheads`),
replayed with every other golden history by tests/unit/test_replay.py: what they recorded."""

import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent.parent / "golden"


def events(name: str) -> list[dict[str, Any]]:
    return json.loads((GOLDEN / f"{name}.json").read_text())["events"]


def queues(name: str) -> list[str]:
    return [
        e["activityTaskScheduledEventAttributes"]["taskQueue"]["name"]
        for e in events(name)
        if "activityTaskScheduledEventAttributes" in e
    ]


def test_a_call_refused_on_the_shared_worker_was_sent_on_its_kinds_queue() -> None:
    """Their kind had no room on the shared worker (settled.activities.lanes): the send inside the
    workflow task (a failed local-activity marker), or on the shared queue (a failed activity), was
    refused before anything was sent, and the send went to the kind's own queue. Every generation's
    history but the queued ones (golden7-queued, golden8-queued-*) sent on the shared queue only."""
    markers = [e for e in events("bulkheads-in-task-refused") if "markerRecordedEventAttributes" in e]
    assert len(markers) == 1 and "KindLaneFull" in json.dumps(markers[0])
    assert queues("bulkheads-in-task-refused") == ["settled-kind-one_at_a_time"]
    assert queues("bulkheads-lane-full") == ["settled", "settled-kind-one_at_a_time"]
    failed = [e for e in events("bulkheads-lane-full") if "activityTaskFailedEventAttributes" in e]
    assert len(failed) == 1 and "KindLaneFull" in json.dumps(failed[0])
    for path in GOLDEN.glob("golden*.json"):
        if "-queued" not in path.stem:  # recorded for a refused send (test_replay.py)
            assert set(queues(path.stem)) <= {"settled"}, path.stem
