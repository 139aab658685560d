"""Operator commands against the real stack, their output parsed from --json."""

import json
import subprocess
import sys
from pathlib import Path

import httpx

from settled.runtime.stack import Stack
from tests.helpers import BOOKING, Sandbox, create, new_id, wait_for, wait_state


def settled(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "settled", *args], env=stack.env(), capture_output=True, text=True, timeout=60
    )


def test_list_status_authorize_and_cancel(api: httpx.Client, sandbox: Sandbox, stack: Stack) -> None:
    conversation = new_id("conv")
    first = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    second = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]

    def listed() -> list[dict] | None:
        rows = json.loads(settled(stack, "list", "--conversation", conversation, "--json").stdout)
        return rows if len(rows) == 2 else None

    rows = wait_for(listed, what="both actions in visibility")
    assert {row["operation_id"] for row in rows} == {first, second}
    assert {row["state"] for row in rows} == {"requested"}

    authorized = settled(stack, "authorize", first, "--json")
    assert authorized.returncode == 0, authorized.stderr
    assert json.loads(authorized.stdout)["state"] == "confirmed"
    assert len(sandbox.records(first)) == 1

    cancelled = json.loads(settled(stack, "cancel", second, "--json").stdout)
    assert cancelled["state"] == "cancelled" and sandbox.records(second) == []

    status = json.loads(settled(stack, "status", first, "--json").stdout)
    assert [entry["state"] for entry in status["history"]] == ["requested", "running", "confirmed"]
    assert any(item["event"] == "authorized" for item in status["log"])

    confirmed = wait_for(
        lambda: json.loads(
            settled(stack, "list", "--conversation", conversation, "--state", "confirmed", "--json").stdout
        ),
        what="the confirmed action in visibility",
    )
    assert [row["operation_id"] for row in confirmed] == [first]
    table = settled(stack, "status", first)
    assert table.returncode == 0 and first in table.stdout and "confirmed" in table.stdout


def test_errors_exit_non_zero_with_the_contract_code(stack: Stack) -> None:
    missing = settled(stack, "status", "no-such-operation", "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["error"]["code"] == "not_found"
    bad_state = settled(stack, "list", "--state", "sleeping")
    assert bad_state.returncode == 1 and "invalid_request" in bad_state.stderr


def test_reconcile_answers_the_verified_status(api: httpx.Client, sandbox: Sandbox, stack: Stack) -> None:
    op = new_id()
    sandbox.fault("refunds", "create", "fail_before_apply", op, status=503)
    create(api, "refund_slow", {"order_id": "o-7", "amount": 3, "currency": "EUR"}, operation_id=op)
    wait_state(api, op, "unknown")
    result = settled(stack, "reconcile", op, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    # The answer comes after the lookup it asked for. Whether that lookup came inside the kind's 2 s
    # commit horizon depends on how soon the command started, so the action's own record says which
    # answer is the verified one.
    lookups = [entry["note"] for entry in answer["log"] if entry["event"] == "lookup"]
    assert lookups, answer
    if "may still be committing" in lookups[-1]:
        # A 404 inside the horizon proves nothing yet: still unknown, sent again once it has passed.
        assert answer["state"] == "unknown", answer
    else:
        # A 404 after it is conclusive: the refund is sent again at once.
        assert answer["state"] in {"running", "confirmed"}, answer
    wait_state(api, op, "confirmed", timeout_s=60)
    assert len(sandbox.records(op)) == 1


def test_export_history_then_replay_it(api: httpx.Client, stack: Stack, tmp_path: Path) -> None:
    op = create(api, "room_booking", BOOKING, authorized=True, wait=10).json()["operation_id"]
    exported = settled(stack, "export-history", op)
    assert exported.returncode == 0, exported.stderr
    history = tmp_path / f"{op}.json"
    history.write_text(exported.stdout)
    assert json.loads(exported.stdout)["events"][0]["eventType"] in (
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
        "WorkflowExecutionStarted",
    )
    replayed = settled(stack, "replay", "--file", str(history), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout) == {"replayed": 1, "failed": 0, "failures": []}
    from_server = settled(stack, "replay", op, "--json")
    assert from_server.returncode == 0 and json.loads(from_server.stdout)["replayed"] == 1
    conversation = json.loads(settled(stack, "status", op, "--json").stdout)["conversation_id"]
    query = f"WorkflowType = 'Action' AND SettledConversationId = '{conversation}'"

    def replayed_by_query() -> dict | None:
        result = settled(stack, "replay", "--query", query, "--json")
        return json.loads(result.stdout) if result.returncode == 0 else None

    assert wait_for(replayed_by_query, what="a replay by query") == {
        "replayed": 1,
        "failed": 0,
        "failures": [],
    }
