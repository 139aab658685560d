"""The rules for real services, end to end on the sandbox: a secret goes nowhere but into its
request; a reversal whose answer is lost is never sent twice unless it cannot apply twice; code kinds
follow every rule of an HTTP kind. Judged from the sandbox's own records and request log."""

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from settled.domain.kinds import Variant
from settled.runtime.stack import Stack
from tests.e2e.conftest import StackOptions
from tests.helpers import (
    BOOKING,
    FAST,
    PAYOUT,
    SERVICE_KINDS,
    TEST_KINDS,
    Sandbox,
    create,
    new_id,
    status,
    wait_for,
    wait_state,
)

TOKEN = "tok-3b9f2c4e-very-secret"  # from the environment
FILED = "file-7d1e0a55-also-secret"  # from a file named by NAME_FILE
_SECRET_FILE = Path(tempfile.gettempdir()) / f"settled-test-booking-key-{os.getpid()}"
_PLAIN = {**FAST, "requires_authorization": None, "say": None}

STACK = StackOptions(
    {
        **TEST_KINDS,
        **SERVICE_KINDS,
        # Credentials on every request: the sandbox ignores them, the test looks for them everywhere.
        "secret_booking": Variant(
            "room_booking",
            {
                **_PLAIN,
                "auth": {"type": "bearer", "token": "{secret.BOOKING_TOKEN}"},
                "headers": {"X-Api-Key": "{secret.BOOKING_KEY}"},
            },
        ),
        "coded_booking": Variant(
            None,
            {
                "description": "reserve the meeting room",
                "handler": "tests.e2e.sandbox_handler:booking",
                **{k: v for k, v in FAST.items()},
            },
        ),
        "slow_coded_booking": Variant(
            None,
            {
                "description": "reserve the meeting room",
                "handler": "tests.e2e.sandbox_handler:slow_booking",
                **FAST,
            },
        ),
    },
    env={"BOOKING_TOKEN": TOKEN, "BOOKING_KEY_FILE": str(_SECRET_FILE)},
)


@pytest.fixture(scope="module", autouse=True)
def _secret_file() -> Any:
    _SECRET_FILE.write_text(FILED + "\n")  # one trailing newline is dropped
    yield
    _SECRET_FILE.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def stack(_secret_file: None, module_stack: Stack) -> Stack:
    return module_stack


def readable(history_json: str) -> str:
    """An exported history with every payload's data decoded (proto JSON writes it as base64), so a
    search sees the inputs, results, memos and search attributes themselves."""
    texts = [history_json]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("data"), str) and "metadata" in node:
                texts.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(history_json))
    return "\n".join(texts)


def booked(sandbox: Sandbox, key: str) -> list[dict[str, Any]]:
    return sandbox.records(key, service="bookings")


def test_a_reversal_whose_answer_is_lost_is_looked_up_not_sent_twice(
    stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("unkeyed")
    created = create(module_api, "unkeyed_booking", BOOKING, operation_id=op, wait=10).json()
    assert created["state"] == "confirmed"
    module_sandbox.fault("bookings", "cancel", "drop_after_apply", op)
    module_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"})
    final = wait_state(module_api, op, "cancelled", timeout_s=30)
    assert final["compensated"] and final["business_ref"] == created["business_ref"]
    records = booked(module_sandbox, op)
    assert [record["status"] for record in records] == ["cancelled"]
    assert len(module_sandbox.requests(op, op="cancel")) == 1  # looked up, never sent again
    assert module_sandbox.requests(op, op="lookup")


def test_a_code_kind_is_confirmed_by_the_service_and_reversed(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("coded")
    created = create(module_api, "coded_booking", BOOKING, operation_id=op, wait=10).json()
    assert created["state"] == "confirmed" and created["business_ref"].startswith("b-")
    assert [record["id"] for record in booked(module_sandbox, op)] == [created["business_ref"]]
    kinds = {kind["name"]: kind for kind in module_api.get("/v1/kinds").json()["kinds"]}
    assert kinds["coded_booking"]["compensable"] and not kinds["slow_coded_booking"]["requires_authorization"]
    module_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"})
    final = wait_state(module_api, op, "cancelled")
    assert final["compensated"] and [r["status"] for r in booked(module_sandbox, op)] == ["cancelled"]


def test_a_code_kind_whose_answer_is_lost_is_looked_up_once_and_applied_once(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("coded-lost")
    module_sandbox.fault("bookings", "create", "drop_after_apply", op)
    create(module_api, "coded_booking", BOOKING, operation_id=op)
    final = wait_state(module_api, op, "confirmed", timeout_s=30)
    assert "unknown" in [entry["state"] for entry in final["history"]]
    assert len(booked(module_sandbox, op)) == 1 and len(module_sandbox.writes(op)) == 1


def test_a_handler_that_outlives_its_timeout_is_unknown_not_failed(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("coded-slow")
    create(module_api, "slow_coded_booking", BOOKING, operation_id=op)
    unknown = wait_state(module_api, op, "unknown")
    assert "did not answer within 1s" in (unknown["reason"] or "") and unknown["claim"] == "unknown"
    assert booked(module_sandbox, op) == []


def test_a_service_that_quotes_our_credentials_back_never_gets_them_into_a_reason(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = new_id("secret-refused")
    module_sandbox.fault("bookings", "create", "unauthorized", op)
    failed = create(module_api, "secret_booking", BOOKING, operation_id=op, wait=10).json()
    assert failed["state"] == "failed" and "refused our credentials" in failed["reason"]
    assert "invalid credentials: Bearer [secret]" in failed["reason"] and TOKEN not in str(failed)
    assert booked(module_sandbox, op) == []


def test_a_secret_goes_into_its_requests_and_nowhere_else(
    stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    # Runs after a service quoted our credentials back in an error (the test above).
    ops = [new_id("secret"), new_id("secret-lost")]
    create(module_api, "secret_booking", BOOKING, operation_id=ops[0], wait=10)
    module_sandbox.fault("bookings", "create", "drop_after_apply", ops[1])
    create(module_api, "secret_booking", BOOKING, operation_id=ops[1])
    for op in ops:
        wait_state(module_api, op, "confirmed", timeout_s=30)
    module_api.post(f"/v1/actions/{ops[0]}/cancel", json={"by": "caller"})
    wait_state(module_api, ops[0], "cancelled")
    # That the credentials do reach the service is proved against servers that check them
    # (tests/services: the CalDAV server refuses a wrong password, the payments API a missing key).

    seen: dict[str, str] = {}
    for op in ops:
        seen[f"status {op}"] = module_api.get(f"/v1/actions/{op}").text
        exported = subprocess.run(
            [sys.executable, "-m", "settled", "export-history", op],
            env=stack.env(), capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        seen[f"history {op}"] = readable(exported.stdout) + exported.stderr
        # The search sees into the payloads: the kind's templates are there, naming the secret.
        assert "{secret.BOOKING_TOKEN}" in seen[f"history {op}"] and '"confirmed"' in seen[f"history {op}"]
    conversation = status(module_api, ops[0])["conversation_id"]
    seen["handoff"] = module_api.get(f"/v1/conversations/{conversation}/handoff").text
    seen["kinds"] = module_api.get("/v1/kinds").text
    seen["api metrics"] = module_api.get("/metrics").text
    seen["worker metrics"] = httpx.get(stack.worker_metrics_url).text
    listed = subprocess.run(
        [sys.executable, "-m", "settled", "list", "--kind", "secret_booking", "--json"],
        env=stack.env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    seen["list (search attributes, memo)"] = listed.stdout
    for log in (stack.data_dir / "logs").glob("*.log"):
        if log.name != "sandbox.log":  # the service's own log is the service's business
            seen[f"log {log.name}"] = log.read_text(errors="replace")
    assert "secret_booking" in seen["kinds"] and "Authorization" not in seen["kinds"]
    for where, text in seen.items():
        for value in (TOKEN, FILED):
            assert value not in text, f"a secret's value is in {where}"


def test_check_kinds_shows_the_requests_with_the_secrets_masked(stack: Stack) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "settled", "check-kinds"],
        env=stack.env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert "Authorization: Bearer {secret.BOOKING_TOKEN}" in checked.stdout
    assert (
        "X-Api-Key: {secret.BOOKING_KEY}" in checked.stdout
        and "secret BOOKING_KEY: set here" in checked.stdout
    )
    assert "handler tests.e2e.sandbox_handler:booking (imported)" in checked.stdout
    assert TOKEN not in checked.stdout and FILED not in checked.stdout


def transfer(sandbox: Sandbox, key: str) -> dict[str, Any]:
    (record,) = sandbox.records(key, service="transfers")
    return record


def test_an_accepted_payout_is_running_not_done_until_the_service_finishes_it(
    module_api: httpx.Client, module_sandbox: Sandbox, slow_transfers: None
) -> None:
    op = new_id("payout")
    accepted = create(module_api, "transfer", PAYOUT, operation_id=op, wait=3).json()
    assert (accepted["state"], accepted["claim"], accepted["dispatched"]) == ("running", "in_progress", True)
    assert accepted["business_ref"] == transfer(module_sandbox, op)["id"]
    assert "accepted" in accepted["say"] and "isn't done" in accepted["say"]
    assert transfer(module_sandbox, op)["status"] == "pending"
    finished = module_sandbox.http.post(f"/_sandbox/transfers/{accepted['business_ref']}/finish")
    assert finished.status_code == 200
    final = wait_state(module_api, op, "confirmed")
    assert final["business_ref"] == accepted["business_ref"] and final["claim"] == "done"
    assert transfer(module_sandbox, op)["status"] == "succeeded"
    assert len(module_sandbox.writes(op)) == 1 and final["attempts"] == 1


def test_an_accepted_payout_the_service_fails_is_failed_with_its_reason(
    module_api: httpx.Client, module_sandbox: Sandbox, slow_transfers: None
) -> None:
    op = new_id("payout-fails")
    accepted = create(module_api, "transfer", PAYOUT, operation_id=op, wait=3).json()
    assert accepted["state"] == "running"
    module_sandbox.http.post(
        f"/_sandbox/transfers/{accepted['business_ref']}/finish",
        json={"outcome": "failed", "failure_reason": "account_closed"},
    )
    final = wait_state(module_api, op, "failed")
    assert "account_closed" in (final["reason"] or "") and final["claim"] == "not_done"
    assert transfer(module_sandbox, op)["status"] == "failed"


def test_a_payout_whose_answer_is_lost_while_pending_is_never_called_done_early(
    module_api: httpx.Client, module_sandbox: Sandbox, slow_transfers: None
) -> None:
    op = new_id("payout-lost")
    module_sandbox.fault("transfers", "create", "drop_after_apply", op)
    create(module_api, "transfer", PAYOUT, operation_id=op)
    running = wait_state(module_api, op, "running", timeout_s=30)
    wait_for(lambda: status(module_api, op)["business_ref"], what="the lookup to find the pending payout")
    assert "unknown" in [entry["state"] for entry in status(module_api, op)["history"]]
    assert running["claim"] == "in_progress"
    module_sandbox.http.post(f"/_sandbox/transfers/{transfer(module_sandbox, op)['id']}/finish")
    wait_state(module_api, op, "confirmed")
    assert len(module_sandbox.records(op, service="transfers")) == 1
