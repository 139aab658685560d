"""Processes SIGKILLed at chosen moments of a write, then restarted (Jepsen-style: a write
whose answer was lost is indeterminate, never failed).

The moments are made exact with the sandbox, not with timing: a write is *held* at the service
(applied on release, or not), or *hangs* after the service applied it; "the answer reached the worker
but was not recorded" is a worker stopped with SIGSTOP while the held write is released and answered,
then SIGKILLed. Throughout, a witness reads every action's status and keeps each answer with its time;
afterwards every `done` must have followed a committed record and no `not_done` may have contradicted
one. These tests run a stack of their own, so the session's stack is untouched.
"""

import itertools
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from settled.runtime.stack import Child, Stack
from tests.e2e.conftest import LONG_TIMEOUT, TAKEOVER_S, StackOptions
from tests.e2e.watch import ClaimWatcher
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, states_seen, wait_for, wait_state

pytestmark = pytest.mark.timeout(300)
# Without the API's own worker, so that every send runs in the worker these tests kill; the API killed
# mid-send, with its worker on, is tests/e2e/test_api_crash.py.
STACK = StackOptions(LONG_TIMEOUT.kinds, env={"SETTLED_API_WORKER": "0"})

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
# outcome (settled may then send a deduplicated write inside the workflow task, a local activity).
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
                pool.submit(send_create, api.base_url, kind, params, op, new_id("conv"), wait)
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


def send_create(
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


def test_worker_killed_mid_dispatch_is_settled_by_a_lookup_not_a_second_request(
    module_api: httpx.Client, module_sandbox: Sandbox, module_stack: Stack
) -> None:
    op = new_id()
    hold = module_sandbox.fault("refunds", "create", "hold", op, apply=True)
    create(module_api, "refund_nodedup", REFUND, operation_id=op)
    module_sandbox.wait_held(op)
    module_stack.children["worker"].kill()  # SIGKILL while the request is at the service
    module_sandbox.release(hold)  # the service applies it; the answer goes nowhere
    wait_for(lambda: len(module_sandbox.records(op)) == 1, what="the refund record")
    module_stack.start_worker()
    action = wait_state(module_api, op, "confirmed", timeout_s=30)
    assert "unknown" in states_seen(action)
    assert len(module_sandbox.writes(op)) == 1
    assert len(module_sandbox.records(op)) == 1
    assert action["business_ref"] == module_sandbox.records(op)[0]["id"]


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
