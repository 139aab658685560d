"""Crashes and outages of whole processes: nothing a customer was told is lost, nothing runs twice.

These tests stop and restart parts of a stack of their own, so the session's stack is not disturbed.
"""

import signal
from pathlib import Path

import httpx

from settled.runtime.stack import Stack
from tests.e2e.conftest import StackOptions
from tests.helpers import (
    BOOKING,
    REFUND,
    Sandbox,
    create,
    healthy,
    new_id,
    status,
    wait_for,
    wait_state,
)

# The test kinds as they are: the restarts let every timeout run its course.
STACK = StackOptions()


def test_the_temporal_server_restarted_on_its_data_dir_loses_nothing(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    api, conversation = module_api, new_id("conv")
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
    module_sandbox.fault("refunds", "create", "fail_before_apply", unknown, status=503)
    module_sandbox.fault("refunds", "lookup", "fail_before_apply", unknown, status=503, count=0)
    create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=unknown)
    wait_state(api, unknown, "unknown")
    before = api.get(f"/v1/conversations/{conversation}/handoff").json()

    server = module_stack.children["temporal"]
    server.popen.send_signal(signal.SIGTERM)
    server.popen.wait(30)
    assert api.get(f"/v1/actions/{waiting}").status_code == 503  # said plainly, not a 500
    module_stack.start_server()
    wait_for(lambda: healthy(api), 60, "the API to see Temporal and a worker again")

    after = api.get(f"/v1/conversations/{conversation}/handoff").json()
    assert after["channels"] == before["channels"] == {"voice": "closed", "text": "unused"}
    assert [a["operation_id"] for a in after["actions"]] == [a["operation_id"] for a in before["actions"]]
    assert status(api, done["operation_id"])["presented"]["completed"] is False
    assert status(api, waiting)["state"] == "requested"
    module_sandbox.clear_faults()  # the lookups resume and can answer now: never applied, sent, confirmed
    assert wait_state(api, unknown, "confirmed", timeout_s=30)["attempts"] == 2
    assert (
        len(module_sandbox.records(unknown)) == 1 and len(module_sandbox.records(done["operation_id"])) == 1
    )


def test_the_business_service_down_then_back_settles_without_a_duplicate(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    sandbox_process = module_stack.children["sandbox"]
    sandbox_process.stop()
    op = create(module_api, "room_booking", BOOKING, authorized=True).json()["operation_id"]

    def refused_twice() -> dict | None:
        current = status(module_api, op)
        tries = [item for item in current["log"] if item["event"] == "retry"]
        return current if tries else None

    during = wait_for(refused_twice, 30, "repeated connection failures")
    assert during["state"] == "requested" and during["attempts"] == 0 and during["claim"] == "in_progress"
    assert "Nothing has been sent yet" in during["say"]
    module_stack.start_sandbox()
    action = wait_state(module_api, op, "confirmed", timeout_s=60)
    assert action["attempts"] == 1
    assert len(module_sandbox.records(op)) == 1 and len(module_sandbox.writes(op)) == 1
    assert len(action["history"]) <= 5  # repeated refusals fold into one entry


def test_a_second_worker_on_the_same_task_queue_shares_the_work(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    module_stack.start_worker("worker-2")
    try:
        ops = [
            create(module_api, "room_booking", BOOKING, authorized=True).json()["operation_id"]
            for _ in range(6)
        ]
        module_stack.children["worker"].kill()
        for op in ops:
            wait_state(module_api, op, "confirmed", timeout_s=30)
            assert len(module_sandbox.records(op)) == 1
    finally:
        module_stack.start_worker()
        module_stack.children["worker-2"].stop()
    assert Path(module_stack.data_dir / "logs" / "worker-2.log").exists()
