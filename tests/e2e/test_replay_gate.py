"""`settled replay` as the gate a deploy waits on, driven as a process against the session's stack:
a file that is not a whole history is one line and exit 1 (never the SDK's panic and a hang); a query
that matches nothing replays nothing and exits 0; a real history still replays, a real
non-determinism still fails; and a stuck SDK meets the last-resort deadline. Every run has a deadline
of its own, so a hang fails the test instead of stalling the suite."""

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.helpers import BOOKING, create, new_id

# Far beyond what a replay takes on a busy machine (a few seconds), far below a hang.
RUN_DEADLINE_S = 120.0


def settled(stack: Stack, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "settled", *args],
        env=stack.env(),
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def exported(api: httpx.Client, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real action's history, as `settled export-history` writes it."""
    op = create(api, "room_booking", BOOKING, authorized=True, wait=10).json()["operation_id"]
    result = settled(stack, "export-history", op)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _first_local_activity_renamed(history: dict[str, Any]) -> dict[str, Any]:
    """The history with its first local activity recorded under another type: whole and well formed,
    and not what the code does (the SDK's non-determinism check)."""
    changed = json.loads(json.dumps(history))
    for event in changed["events"]:
        marker = event.get("markerRecordedEventAttributes")
        if marker and marker["markerName"] == "core_local_activity":
            payload = marker["details"]["data"]["payloads"][0]
            data = json.loads(base64.b64decode(payload["data"]))
            data["activity_type"] = "not_" + data["activity_type"]
            payload["data"] = base64.b64encode(json.dumps(data).encode()).decode()
            return changed
    raise AssertionError("the history has no local activity")


def _swapped(history: dict[str, Any]) -> dict[str, Any]:
    events = list(history["events"])
    events[2], events[3] = events[3], events[2]
    return {"events": events}


BAD_FILES: dict[str, tuple[Any, str]] = {
    # name: (what the file holds, given the real history; what the one line says)
    "empty-events": (lambda h: {"events": []}, "not a whole workflow history: has no events"),
    "no-start": (
        lambda h: {"events": h["events"][1:]},
        "its first event is WORKFLOW_TASK_SCHEDULED, not WORKFLOW_EXECUTION_STARTED",
    ),
    "out-of-sequence": (_swapped, "its events are out of sequence: event 3 has id 4"),
    "not-json": (lambda h: "{events: [", "not JSON"),
    "not-a-history": (lambda h: {"workflow": "booking"}, 'not a workflow history: no "events" list'),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_file_that_is_not_a_whole_history_is_one_line_and_exit_1(
    stack: Stack, exported: dict[str, Any], tmp_path: Path, name: str
) -> None:
    make, words = BAD_FILES[name]
    content = make(exported)
    path = tmp_path / f"{name}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    result = settled(stack, "replay", "--file", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    said = result.stderr.strip()
    assert len(said.splitlines()) == 1, said
    assert said.startswith(f"settled: invalid_request: --file {path}: ") and words in said, said
    assert "panicked" not in result.stderr and "Traceback" not in result.stderr
    as_json = settled(stack, "replay", "--file", str(path), "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_request"


def test_a_query_that_matches_nothing_replays_nothing_and_exits_0(stack: Stack) -> None:
    query = f"WorkflowType = 'Action' AND SettledConversationId = '{new_id('nobody')}'"
    result = settled(stack, "replay", "--query", query)
    assert result.returncode == 0, result.stderr
    assert "--query matched no workflow" in result.stdout
    assert "replayed 0 histories, 0 non-deterministic" in result.stdout
    as_json = settled(stack, "replay", "--query", query, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"replayed": 0, "failed": 0, "failures": []}
    assert "--query matched no workflow" in as_json.stderr
    # Nothing asked for at all is still a mistake.
    nothing = settled(stack, "replay")
    assert nothing.returncode == 1 and "nothing to replay" in nothing.stderr


def test_a_real_history_replays_and_a_real_non_determinism_exits_1(
    stack: Stack, exported: dict[str, Any], tmp_path: Path
) -> None:
    real = tmp_path / "real.json"
    real.write_text(json.dumps(exported))
    replayed = settled(stack, "replay", "--file", str(real), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout) == {"replayed": 1, "failed": 0, "failures": []}

    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(_first_local_activity_renamed(exported)))
    failed = settled(stack, "replay", "--file", str(real), "--file", str(changed), "--json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    summary = json.loads(failed.stdout)
    assert summary["replayed"] == 2 and summary["failed"] == 1
    assert summary["failures"][0]["workflow_id"] == "changed"
    assert "Nondeterminism" in summary["failures"][0]["error"]


def test_a_stuck_sdk_meets_the_deadline_in_one_line(stack: Stack, tmp_path: Path) -> None:
    """The last resort, against the SDK's real hang: a history the checks would refuse is handed to
    the replay itself (past the checks), and the deadline ends it."""
    program = (
        "import asyncio\n"
        "from temporalio.client import WorkflowHistory\n"
        "from settled.cli.replay import replay\n"
        "from settled.runtime.config import Settings\n"
        "headless = WorkflowHistory.from_json('headless', {'events': []})\n"
        "asyncio.run(replay([headless], Settings.from_env(), 3.0, False))\n"
        "print('the replay returned')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        env=stack.env(),
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the replay returned" not in result.stdout
    stuck = [line for line in result.stderr.splitlines() if line.startswith("settled: ")]
    assert stuck == [
        "settled: replay_stuck: the Temporal SDK gave no verdict on headless within 3 s: it cannot "
        "replay this history (is it a whole exported history?)"
    ]
