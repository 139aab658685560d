"""The API killed with creates in flight, then the clients' retries: nothing is made twice.

With the API's own worker on (the default), a new action's first task, and its send, run in the API
process: killing it kills those sends mid-flight. Temporal hands the task to another worker after the
workflow task timeout, which repeats a deduplicated send with the same key and never repeats one to a
service without deduplication without a lookup's word. This module runs a stack of its own.
"""

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.e2e.conftest import TAKEOVER_S
from tests.e2e.test_crashes import CRASH_KINDS, send_create
from tests.e2e.watch import ClaimWatcher
from tests.helpers import Sandbox, create, new_id, wait_state

pytestmark = pytest.mark.timeout(300)


def _create_until_answered(
    api: httpx.Client, kind: str, params: dict, op: str, conversation: str, tries: int = 5
) -> httpx.Response:
    """A client's retry as settled.client does it: the same operation id again on a 503 (the API
    bounds how long it waits for a busy workflow, e.g. one whose write runs inside its task)."""
    for _ in range(tries):
        response = create(api, kind, params, operation_id=op, conversation_id=conversation, authorized=True)
        if response.status_code != 503:
            return response
    return response


async def _executions(stack: Stack, ops: list[str]) -> dict[str, int]:
    """Workflow executions per operation id; a run that continued as new (retention redacting the
    params does that) is the same execution going on, not a second one."""
    client = await Client.connect(stack.temporal_address)
    counts = {}
    for op in ops:
        query = f"WorkflowId = '{action_workflow_id(None, op)}'"
        runs = [run async for run in client.list_workflows(query)]
        counts[op] = len([run for run in runs if run.status != WorkflowExecutionStatus.CONTINUED_AS_NEW])
    return counts


def test_the_api_killed_with_creates_in_flight_and_retried_makes_nothing_twice(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    conversation = new_id("conv")
    held = {new_id("held"): (kind, params, service) for kind, params, service in CRASH_KINDS * 3}
    burst = {new_id("burst"): (kind, params, service) for kind, params, service in CRASH_KINDS * 5}
    faults = [
        module_sandbox.fault(service, "create", "hold", op, apply=True)
        for op, (_, _, service) in held.items()
    ]
    every = {**held, **burst}
    with ClaimWatcher(module_stack.api_url, list(every)) as watcher, ThreadPoolExecutor(len(every)) as pool:
        first: dict[str, Future[int | str]] = {
            op: pool.submit(send_create, module_stack.api_url, kind, params, op, conversation, 20)
            for op, (kind, params, _) in held.items()
        }
        for op in held:
            module_sandbox.wait_held(op)  # the API is now waiting on each of these updates
        first |= {
            op: pool.submit(send_create, module_stack.api_url, kind, params, op, conversation, 5)
            for op, (kind, params, _) in burst.items()
        }
        module_stack.children["api"].kill()
        answers = {op: future.result() for op, future in first.items()}
        assert all(not isinstance(answers[op], int) for op in held), answers  # they died with the API
        module_stack.start_api()

        for fault_id in faults:
            module_sandbox.release(fault_id)
        for op, (kind, params, _) in every.items():
            again = _create_until_answered(module_api, kind, params, op, conversation)
            # 201 only if the first try never reached Temporal; a held write proves that it did.
            assert again.status_code in ((200,) if op in held else (200, 201)), again.text
            assert again.json()["operation_id"] == op
        for op, (kind, _, _) in every.items():
            action = wait_state(module_api, op, "confirmed", timeout_s=TAKEOVER_S)
            writes = module_sandbox.writes(op)
            assert len(module_sandbox.records(op)) == 1
            if kind == "refund_nodedup":  # never re-sent without a lookup's word
                assert (action["attempts"], len(writes)) == (1, 1), (action["history"], writes)
            else:  # a send inside the API's task that died with it is repeated, with the same key
                assert {write["key"] for write in writes} == {op}, writes
        verdict = watcher.verdict(module_api, module_sandbox.http)
    assert verdict.violations == [], verdict.violations
    assert set(asyncio.run(_executions(module_stack, list(every))).values()) == {1}
    tracked = module_api.get(f"/v1/conversations/{conversation}/handoff").json()["actions"]
    assert sorted(a["operation_id"] for a in tracked) == sorted(every)
