"""Crashes and outages of whole processes: nothing a customer was told is lost, nothing runs twice.

These tests stop and restart parts of a stack of their own, so the session's stack is not disturbed.
"""

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from settled.stack import Stack
from tests.helpers import (
    BOOKING,
    REFUND,
    Sandbox,
    api_client,
    create,
    healthy,
    new_id,
    sandbox_of,
    start_stack,
    status,
    wait_for,
    wait_state,
)


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = start_stack(tmp_path_factory.mktemp("restarts"))
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def own_api(own_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(own_stack) as client:
        yield client


@pytest.fixture(scope="module")
def own_sandbox(own_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(own_stack) as truth:
        yield truth


def test_the_temporal_server_restarted_on_its_data_dir_loses_nothing(
    own_stack: Stack, own_api: httpx.Client, own_sandbox: Sandbox
) -> None:
    api, conversation = own_api, new_id("conv")
    waiting = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    done = create(api, "refund", REFUND, conversation_id=conversation, authorized=True, wait=10).json()
    api.post(
        f"/v1/actions/{done['operation_id']}/presented",
        json={"channel": "voice", "text": "The ref", "completed": False},
    )
    api.post(
        f"/v1/conversations/{conversation}/events",
        json={"type": "channel_closed", "channel": "voice", "reason": "dropped"},
    )
    unknown = new_id()
    own_sandbox.fault("refunds", "create", "fail_before_apply", unknown, status=503)
    own_sandbox.fault("refunds", "lookup", "fail_before_apply", unknown, status=503, count=0)
    create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=unknown)
    wait_state(api, unknown, "unknown")
    before = api.get(f"/v1/conversations/{conversation}/handoff").json()

    server = own_stack.children["temporal"]
    server.popen.send_signal(signal.SIGTERM)
    server.popen.wait(30)
    assert api.get(f"/v1/actions/{waiting}").status_code == 503  # said plainly, not a 500
    own_stack.start_server()
    wait_for(lambda: healthy(api), 60, "the API to see Temporal and a worker again")

    after = api.get(f"/v1/conversations/{conversation}/handoff").json()
    assert after["channels"] == before["channels"] == {"voice": "closed", "text": "unused"}
    assert [a["operation_id"] for a in after["actions"]] == [a["operation_id"] for a in before["actions"]]
    assert status(api, done["operation_id"])["presented"]["completed"] is False
    assert status(api, waiting)["state"] == "requested"
    own_sandbox.clear_faults()  # the lookups resume and can answer now: never applied, sent, confirmed
    assert wait_state(api, unknown, "confirmed", timeout_s=30)["attempts"] == 2
    assert len(own_sandbox.records(unknown)) == 1 and len(own_sandbox.records(done["operation_id"])) == 1


def test_the_business_service_down_then_back_settles_without_a_duplicate(
    own_stack: Stack, own_api: httpx.Client, own_sandbox: Sandbox
) -> None:
    sandbox_process = own_stack.children["sandbox"]
    sandbox_process.stop()
    op = create(own_api, "room_booking", BOOKING, authorized=True).json()["operation_id"]

    def refused_twice() -> dict | None:
        current = status(own_api, op)
        tries = [item for item in current["log"] if item["event"] == "retry"]
        return current if tries else None

    during = wait_for(refused_twice, 30, "repeated connection failures")
    assert during["state"] == "requested" and during["attempts"] == 0 and during["claim"] == "in_progress"
    assert "Nothing has been sent yet" in during["say"]
    own_stack.start_sandbox()
    action = wait_state(own_api, op, "confirmed", timeout_s=60)
    assert action["attempts"] == 1
    assert len(own_sandbox.records(op)) == 1 and len(own_sandbox.writes(op)) == 1
    assert len(action["history"]) <= 5  # repeated refusals fold into one entry


def test_a_second_worker_on_the_same_task_queue_shares_the_work(
    own_stack: Stack, own_api: httpx.Client, own_sandbox: Sandbox
) -> None:
    own_stack.start_worker("worker-2")
    try:
        ops = [
            create(own_api, "room_booking", BOOKING, authorized=True).json()["operation_id"] for _ in range(6)
        ]
        own_stack.children["worker"].kill()
        for op in ops:
            wait_state(own_api, op, "confirmed", timeout_s=30)
            assert len(own_sandbox.records(op)) == 1
    finally:
        own_stack.start_worker()
        own_stack.children["worker-2"].stop()
    assert Path(own_stack.data_dir / "logs" / "worker-2.log").exists()
