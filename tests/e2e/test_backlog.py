"""When no worker runs an update in time (a backlog, a stalled worker), the API still answers within
the caller's wait plus a bounded grace, says so plainly, and a retry with the same operation id
meets the same action: nothing is lost and nothing is written twice."""

import os
import signal
import time

import httpx

from settled.gateway import ANSWER_GRACE_S
from settled.stack import Stack
from tests.e2e.conftest import StackOptions
from tests.helpers import BOOKING, Sandbox, create, new_id

# Without the API's own worker, which would run a new action's first task eagerly: the stalled
# worker is then the only one that can, as when every worker is stalled.
STACK = StackOptions(env={"SETTLED_API_WORKER": "0"})


def test_a_stalled_worker_gets_the_caller_a_bounded_answer_and_the_retry_the_truth(
    module_stack: Stack,
) -> None:
    worker = module_stack.children["worker"].popen
    operation_id = new_id()
    with (
        httpx.Client(base_url=module_stack.api_url, timeout=60) as api,
        httpx.Client(base_url=module_stack.sandbox_url, timeout=10) as sandbox_http,
    ):
        os.killpg(worker.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            stalled = create(api, "room_booking", BOOKING, operation_id=operation_id, authorized=True, wait=1)
            elapsed = time.monotonic() - started
        finally:
            os.killpg(worker.pid, signal.SIGCONT)
        assert stalled.status_code == 503, stalled.text
        assert stalled.json()["error"]["code"] == "temporal_unavailable"
        assert "same operation_id" in stalled.json()["error"]["message"]
        assert 1 + ANSWER_GRACE_S - 0.5 <= elapsed < 1 + ANSWER_GRACE_S + 5

        retried = create(api, "room_booking", BOOKING, operation_id=operation_id, authorized=True, wait=25)
        assert retried.status_code in (200, 201), retried.text
        assert retried.json()["state"] == "confirmed"
        assert len(Sandbox(sandbox_http).records(operation_id)) == 1
