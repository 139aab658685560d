"""Processes SIGKILLed at chosen moments of a write, then restarted (Jepsen-style: a write
whose answer was lost is indeterminate, never failed).

The moments are made exact with the sandbox, not with timing: a write is *held* at the service
(applied on release, or not), or *hangs* after the service applied it; "the answer reached the worker
but was not recorded" is a worker stopped with SIGSTOP while the held write is released and answered,
then SIGKILLed. Throughout, a witness reads every action's status and keeps each answer with its time;
afterwards every `done` must have followed a committed record and no `not_done` may have contradicted
one. These tests run a stack of their own, so the session's stack is untouched.
"""

import asyncio
import itertools
import os
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from settled.identity import action_workflow_id
from settled.stack import Child, Stack
from tests.e2e.conftest import TAKEOVER_S
from tests.e2e.watch import ClaimWatcher
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, wait_for, wait_state

pytestmark = pytest.mark.timeout(300)

# (kind, params, service): one kind the service deduplicates by Idempotency-Key, one it does not.
CRASH_KINDS = [("room_booking", BOOKING, "bookings"), ("refund_nodedup", REFUND, "refunds")]
# The moment of the kill -> the sandbox fault that makes it exact.
POINTS: dict[str, tuple[str, dict[str, Any]]] = {
    "held_unapplied": ("hold", {"apply": False}),  # the request never takes effect
    "held_then_applied": ("hold", {"apply": True}),  # it takes effect after the worker died
    "applied_response_pending": ("hang", {"apply": True}),  # applied, the answer not sent yet
    "response_sent_unrecorded": ("hold", {"apply": True}),  # answered to a stopped worker
}
HELD = ("held_unapplied", "held_then_applied")


@pytest.fixture(autouse=True)
def _faults_cleared(module_sandbox: Sandbox) -> Iterator[None]:
    yield
    module_sandbox.clear_faults()


@dataclass
class Armed:
    point: str
    kind: str
    operation_id: str
    fault_id: str


def _first_write(sandbox: Sandbox, op: str) -> dict[str, Any]:
    return sandbox.writes(op)[0]


# A create answered at once (the write goes through an activity), and one whose caller waits for the
# outcome (settled may then send a deduplicated write inside the workflow task, a local activity: in
# the API's own worker, which starts the action eagerly; the API killed mid-send is tested below).
CREATE_WAITS = (0.0, 25.0)


def arm(api: httpx.Client, sandbox: Sandbox, watcher: ClaimWatcher, pool: ThreadPoolExecutor) -> list[Armed]:
    """One authorized action per (moment, kind, create wait), each stopped at its moment inside the
    sandbox. A waiting create's answer, if any, is seen by the witness like any other."""
    armed = []
    for point, (mode, extra) in POINTS.items():
        for (kind, params, service), wait in itertools.product(CRASH_KINDS, CREATE_WAITS):
            op = new_id(point.replace("_", "-"))
            fault_id = sandbox.fault(service, "create", mode, op, **extra)
            watcher.watch(op)
            if wait:
                pool.submit(_send_create, api.base_url, kind, params, op, new_id("conv"), wait)
            else:
                assert create(api, kind, params, operation_id=op, authorized=True).status_code == 201
            armed.append(Armed(point, kind, op, fault_id))
    for item in armed:
        if POINTS[item.point][0] == "hold":
            sandbox.wait_held(item.operation_id)
        else:
            wait_for(
                lambda op=item.operation_id: (sandbox.writes(op) or [{}])[0].get("outcome") == "hanging",
                what=f"{item.operation_id} applied and hanging",
            )
            assert len(sandbox.records(item.operation_id)) == 1
    return armed


def kill_mid_dispatch(victim: Child, sandbox: Sandbox, armed: list[Armed]) -> None:
    """Stop the worker, let the service answer the writes it will never record, then SIGKILL it."""
    os.killpg(victim.popen.pid, signal.SIGSTOP)
    unrecorded = [item for item in armed if item.point == "response_sent_unrecorded"]
    for item in unrecorded:
        sandbox.release(item.fault_id)
    for item in unrecorded:
        wait_for(
            lambda op=item.operation_id: _first_write(sandbox, op)["status"] == 201,
            what=f"the answer for {item.operation_id} sent to the stopped worker",
        )
    victim.kill()
    for item in armed:
        if item.point == "applied_response_pending":  # the service saw its client go
            wait_for(lambda op=item.operation_id: _first_write(sandbox, op)["state"] == "done")


def converge(api: httpx.Client, sandbox: Sandbox, watcher: ClaimWatcher, armed: list[Armed]) -> None:
    # While a held write is still in flight, whoever takes over must ask again (a lookup, or a keyed
    # re-send), and must not conclude "not applied" from it.
    for item in armed:
        if item.point in HELD:
            first = _first_write(sandbox, item.operation_id)["seq"]
            wait_for(
                lambda op=item.operation_id, first=first: any(
                    r["seq"] > first and r["state"] == "done" for r in sandbox.requests(op)
                ),
                TAKEOVER_S,
                f"{item.operation_id} asked about again while its write was held",
            )
    for item in armed:
        if item.point in HELD:
            sandbox.release(item.fault_id)
    for item in armed:
        op = item.operation_id
        action = wait_state(api, op, "confirmed", "failed", "cancelled", timeout_s=TAKEOVER_S)
        records = sandbox.records(op)
        assert (action["state"], len(records)) == ("confirmed", 1), (item, action, records)
        assert action["business_ref"] == records[0]["id"]
        if item.kind == "refund_nodedup" and item.point != "held_unapplied":
            # Applied: without deduplication only a lookup may settle it, never a second request.
            assert len(sandbox.writes(op)) == 1, (item, sandbox.writes(op))
    verdict = watcher.verdict(api, sandbox.http)
    assert verdict.violations == [], verdict.violations
    assert verdict.claims.get("done", 0) > 0 and sum(verdict.claims.values()) > len(armed)


def _polling(stack: Stack, name: str) -> bool:
    log = stack.data_dir / "logs" / f"{name}.log"
    return log.exists() and "settled worker: polling" in log.read_text()


ARMED = len(POINTS) * len(CRASH_KINDS) * len(CREATE_WAITS)


def test_one_worker_killed_at_each_moment_of_a_dispatch_then_restarted(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    with ClaimWatcher(module_stack.api_url) as watcher, ThreadPoolExecutor(ARMED) as pool:
        armed = arm(module_api, module_sandbox, watcher, pool)
        kill_mid_dispatch(module_stack.children["worker"], module_sandbox, armed)
        module_stack.start_worker()
        converge(module_api, module_sandbox, watcher, armed)


def test_two_workers_one_killed_at_each_moment_the_other_takes_over(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    with ClaimWatcher(module_stack.api_url) as watcher, ThreadPoolExecutor(ARMED) as pool:
        # Every write is dispatched by the first worker (the only one then), so the kill hits them all.
        armed = arm(module_api, module_sandbox, watcher, pool)
        module_stack.start_worker("worker-2")
        try:
            wait_for(lambda: _polling(module_stack, "worker-2"), 30, "the second worker to poll")
            kill_mid_dispatch(module_stack.children["worker"], module_sandbox, armed)
            converge(module_api, module_sandbox, watcher, armed)
        finally:
            module_stack.start_worker()
            module_stack.children["worker-2"].stop()


def _send_create(
    api_url: str | httpx.URL, kind: str, params: dict, op: str, conversation: str, wait: float
) -> int | str:
    """A create from a client of its own; the status code, or the error if the API died under it."""
    with httpx.Client(base_url=api_url, timeout=40) as client:
        try:
            return create(
                client,
                kind,
                params,
                operation_id=op,
                conversation_id=conversation,
                authorized=True,
                wait=wait,
            ).status_code
        except httpx.HTTPError as error:
            return type(error).__name__


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
            op: pool.submit(_send_create, module_stack.api_url, kind, params, op, conversation, 20)
            for op, (kind, params, _) in held.items()
        }
        for op in held:
            module_sandbox.wait_held(op)  # the API is now waiting on each of these updates
        first |= {
            op: pool.submit(_send_create, module_stack.api_url, kind, params, op, conversation, 5)
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


def _reversal(sandbox: Sandbox, op: str) -> dict[str, Any] | None:
    reversals = sandbox.requests(op, op="cancel")
    return reversals[0] if reversals else None


def test_one_worker_killed_at_each_moment_of_a_reversal_then_restarted(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """The same moments for the compensation a cancel of a confirmed booking sends."""
    api, sandbox = module_api, module_sandbox
    with ClaimWatcher(module_stack.api_url) as watcher:
        armed = []
        for point, (mode, extra) in POINTS.items():
            op = new_id(point.replace("_", "-"))
            assert (
                create(api, "room_booking", BOOKING, operation_id=op, authorized=True, wait=10).json()[
                    "state"
                ]
                == "confirmed"
            )
            fault_id = sandbox.fault("bookings", "cancel", mode, op, **extra)
            watcher.watch(op)
            during = api.post(f"/v1/actions/{op}/cancel").json()
            assert (during["state"], during["cancel_requested"]) == ("confirmed", True)
            armed.append(Armed(point, "room_booking", op, fault_id))
        for item in armed:
            wanted = "held" if POINTS[item.point][0] == "hold" else "hanging"
            wait_for(
                lambda op=item.operation_id, wanted=wanted: (
                    (_reversal(sandbox, op) or {}).get("outcome") == wanted
                ),
                what=f"the reversal of {item.operation_id} {wanted}",
            )
        victim = module_stack.children["worker"]
        os.killpg(victim.popen.pid, signal.SIGSTOP)
        unrecorded = next(item for item in armed if item.point == "response_sent_unrecorded")
        sandbox.release(unrecorded.fault_id)
        wait_for(lambda: (_reversal(sandbox, unrecorded.operation_id) or {}).get("status") == 200)
        victim.kill()
        module_stack.start_worker()
        for item in armed:
            if item.point in HELD:
                sandbox.release(item.fault_id)
        for item in armed:
            op = item.operation_id
            action = wait_state(api, op, "cancelled", timeout_s=TAKEOVER_S)
            records = sandbox.records(op)
            assert action["compensated"] is True and len(records) == 1, (item, action["history"], records)
            assert records[0]["status"] == "cancelled" and action["business_ref"] == records[0]["id"]
        verdict = watcher.verdict(api, sandbox.http)
    assert verdict.violations == [], verdict.violations
