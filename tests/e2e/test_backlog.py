"""When no worker runs an update in time (a backlog, a stalled worker), the API still answers within
the caller's wait plus a bounded grace, says so plainly, and a retry with the same operation id
meets the same action: nothing is lost and nothing is written twice. A new action whose first task no
worker has taken yet (a busy engine, its workers all occupied) is no failure: it is answered with what
its start recorded."""

import asyncio
import os
import signal
import time

import httpx
import pytest
from settled.gateway.gateway import ANSWER_GRACE_S, GatewayError

from settled.domain.models import CreateAction
from settled.runtime.stack import Stack
from tests.e2e.conftest import StackOptions
from tests.e2e.inprocess import gateway_on
from tests.helpers import BOOKING, Sandbox, create, new_id, wait_state

# Without the API's own worker, which would run a new action's first task eagerly: the stalled
# worker is then the only one that can, as when every worker is stalled.
STACK = StackOptions(env={"SETTLED_API_WORKER": "0"})


def test_a_stalled_worker_gets_the_caller_a_bounded_answer_and_the_retry_the_truth(
    module_stack: Stack,
) -> None:
    worker = module_stack.children["worker"].popen
    operation_id, conversation_id = new_id(), new_id("conv")  # the retry comes from the same conversation
    with (
        httpx.Client(base_url=module_stack.api_url, timeout=60) as api,
        httpx.Client(base_url=module_stack.sandbox_url, timeout=10) as sandbox_http,
    ):
        os.killpg(worker.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            stalled = create(
                api, "room_booking", BOOKING, operation_id=operation_id, conversation_id=conversation_id,
                authorized=True, wait=1,
            )  # fmt: skip
            elapsed = time.monotonic() - started
        finally:
            os.killpg(worker.pid, signal.SIGCONT)
        assert stalled.status_code == 503, stalled.text
        assert stalled.json()["error"]["code"] == "temporal_unavailable"
        assert "same operation_id" in stalled.json()["error"]["message"]
        assert 1 + ANSWER_GRACE_S - 0.5 <= elapsed < 1 + ANSWER_GRACE_S + 5

        retried = create(
            api, "room_booking", BOOKING, operation_id=operation_id, conversation_id=conversation_id,
            authorized=True, wait=25,
        )  # fmt: skip
        assert retried.status_code in (200, 201), retried.text
        assert retried.json()["state"] == "confirmed"
        assert len(Sandbox(sandbox_http).records(operation_id)) == 1


async def test_a_start_its_caller_stopped_waiting_for_is_still_made_and_tracked(module_stack: Stack) -> None:
    """Under a burst a start can outlast the caller's wait and grace: the caller is answered 503 at
    its deadline, and the start still finishes, with its conversation told, so the repeat the 503 asks
    for finds the action (cut off instead, it was never made). Here the deadline has passed at once."""
    gateway = await gateway_on(module_stack, answer_grace_s=0.0)
    operation_id, conversation_id = new_id(), new_id("conv")
    body = CreateAction(
        conversation_id=conversation_id, kind="room_booking", params=BOOKING, operation_id=operation_id
    )
    with pytest.raises(GatewayError) as answered:
        await gateway.create(None, body, wait_s=0)
    assert answered.value.code == "temporal_unavailable"

    async with httpx.AsyncClient(base_url=module_stack.api_url, timeout=10) as api:

        async def listed() -> bool:
            handoff = (await api.get(f"/v1/conversations/{conversation_id}/handoff")).json()
            return [action["operation_id"] for action in handoff["actions"]] == [operation_id]

        deadline = time.monotonic() + 20
        while not await listed():
            assert time.monotonic() < deadline, "the cut-off start was never made, or never tracked"
            await asyncio.sleep(0.1)
        status = (await api.get(f"/v1/actions/{operation_id}")).json()
        assert status["state"] == "requested" and status["conversation_id"] == conversation_id


def test_a_new_action_no_worker_has_taken_yet_is_answered_requested_not_503(module_stack: Stack) -> None:
    """No worker polls (all busy, or restarting): the start is durable, its first task waits in the
    queue, and nothing can have been sent. The caller is answered 201 `requested` soon after its wait,
    not 503; the worker back, the action is sent once and confirmed."""
    operation_id = new_id()
    module_stack.children["worker"].stop()
    try:
        with httpx.Client(base_url=module_stack.api_url, timeout=60) as api:
            started = time.monotonic()
            answered = create(
                api, "room_booking", BOOKING, operation_id=operation_id, authorized=True, wait=1
            )
            elapsed = time.monotonic() - started
    finally:
        module_stack.start_worker()
    assert answered.status_code == 201, answered.text
    action = answered.json()
    assert (action["state"], action["dispatched"], action["attempts"]) == ("requested", False, 0)
    assert action["authorized"] and action["claim"] == "in_progress"
    assert 1 <= elapsed < 1 + ANSWER_GRACE_S, elapsed
    with (
        httpx.Client(base_url=module_stack.api_url, timeout=60) as api,
        httpx.Client(base_url=module_stack.sandbox_url, timeout=10) as sandbox_http,
    ):
        assert wait_state(api, operation_id, "confirmed", timeout_s=60)["attempts"] == 1
        assert len(Sandbox(sandbox_http).records(operation_id)) == 1
