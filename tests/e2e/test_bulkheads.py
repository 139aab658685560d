"""Bulkheads ("one kind's trouble stays its own"): many of one kind's requests held open
at its service take nothing another kind needs; the kind's cap (`max_in_flight`) holds; a worker killed
while its kind's slots are full loses nothing and sends nothing twice; `settled worker --kinds` serves
only those kinds' queues; /healthz asks every queue.

The stack's own: one worker process and the API. Both run the shared worker (the API's runs the
workflow tasks it starts eagerly, and the business calls they schedule, up to each kind's shared
budget); only the worker process polls the kinds' own queues. So a kind's requests open at its service
are at most `max_in_flight` in the worker process plus `shared_budget` in the API's."""

import asyncio
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from settled.activities.lanes import queue_slots, shared_budget
from settled.bench.engine import Cost, history_cost
from settled.gateway.gateway import Gateway
from temporalio.client import Client

from settled.domain.kinds import (
    PLAIN_REFUND_PARAMS,
    Kinds,
    KindSpec,
    Variant,
    load_kinds,
    parse_kinds,
    sandbox_kinds_text,
)
from settled.runtime.config import Settings
from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id, kind_task_queue
from tests.e2e.conftest import TAKEOVER_S, StackOptions
from tests.helpers import (
    BOOKING,
    FAST,
    TEST_KINDS,
    Sandbox,
    create,
    healthy,
    new_id,
    states_seen,
    status,
    wait_for,
    wait_state,
)

SLOW = "slow_refund"
WAITED = "slow_refund_waited"
CAP = 12
# The refund service as a slow one: its answers are held by the tests (a `hold` fault on every create),
# and the worker waits for them longer than a busy machine takes to send hundreds and look (or kill
# it), so none has given up and freed its slot meanwhile.
_SLOW = Variant(
    "refund",
    {
        **FAST,
        "timeout_s": 120.0,
        "requires_authorization": None,
        "params_schema": PLAIN_REFUND_PARAMS,
        "say": None,
        "max_in_flight": CAP,
    },
)
STACK = StackOptions(
    {
        "room_booking": TEST_KINDS["room_booking"].but(requires_authorization=None),
        SLOW: _SLOW,
        # The same with a timeout a caller can outwait (`wait` is at most 30 s): its calls may run in task.
        WAITED: _SLOW.but(timeout_s=20.0),
    }
)
REFUND = {"order_id": "o-1", "amount": 5, "currency": "EUR"}
# Saturating a kind takes hundreds of requests: room for a busy machine beyond the usual 180 s.
pytestmark = pytest.mark.timeout(600)
# A booking beside a saturated kind is judged against bookings measured just before on the same
# stack, so a busy machine slows both: its median within this factor of theirs (or under the floor,
# where noise dominates), and none near 20 s, the sign of a booking stuck behind the slow kind.
LATENCY_RATIO = 5.0
LATENCY_FLOOR_S = 2.0
STUCK_S = 20.0


@pytest.fixture
def truth(module_sandbox: Sandbox) -> Iterator[Sandbox]:
    module_sandbox.clear_faults()
    yield module_sandbox
    module_sandbox.clear_faults()


def held(sandbox: Sandbox) -> list[dict[str, Any]]:
    """The slow service's creates being held right now."""
    rows = sandbox.http.get("/_sandbox/requests", params={"op": "create"}).json()["requests"]
    return [row for row in rows if row["service"] == "refunds" and row["state"] == "in_flight"]


def peak_open(sandbox: Sandbox, timeout_s: float) -> int:
    """The most of the slow service's held creates open at once as their senders saw them: each from
    when the service received it until its sender gave up (the kind's timeout). On a busy machine a
    sender may give up before the test looks, and send another, which is not one more at once."""
    received = [datetime.fromisoformat(row["received_at"]) for row in held(sandbox)]
    window = timedelta(seconds=timeout_s)
    return max(
        (sum(start <= moment < start + window for start in received) for moment in received), default=0
    )


def hold_every_refund(sandbox: Sandbox) -> str:
    body = {"service": "refunds", "op": "create", "mode": "hold", "count": 0}
    response = sandbox.http.post("/_sandbox/faults", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def booking_latencies(api: httpx.Client, n: int) -> list[float]:
    """Seconds each of `n` bookings took to be confirmed by their creating call (`wait=30`)."""
    took = []
    for _ in range(n):
        started = time.perf_counter()
        response = create(api, "room_booking", BOOKING, wait=30)
        took.append(time.perf_counter() - started)
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "confirmed", response.json()
    return took


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def assert_usual_latency(alone: list[float], beside: list[float]) -> None:
    """Bookings beside the saturated kind (`beside`) took about what they took just before (`alone`)."""
    assert median(beside) < max(LATENCY_FLOOR_S, LATENCY_RATIO * median(alone)), (alone, beside)
    assert max(beside) < STUCK_S, (alone, beside)


def request_slow(api: httpx.Client, n: int, wait: float = 0) -> list[str]:
    ids = [new_id("slow") for _ in range(n)]
    for operation_id in ids:
        response = create(api, SLOW, REFUND, operation_id=operation_id, wait=wait)
        assert response.status_code == 201, response.text
    return ids


def settle_all(api: httpx.Client, sandbox: Sandbox, fault: str, ids: list[str]) -> list[dict[str, Any]]:
    """Release the held requests; every action ends confirmed, each sent exactly once."""
    sandbox.release(fault)
    sandbox.clear_faults()
    actions = []
    for operation_id in ids:
        action = wait_state(api, operation_id, "confirmed", "failed", timeout_s=TAKEOVER_S)
        assert action["state"] == "confirmed", action
        actions.append(action)
    rows = sandbox.http.get("/_sandbox/requests", params={"op": "create"}).json()["requests"]
    sent: dict[str, int] = {}
    for row in rows:
        if row["key"] in ids:
            sent[row["key"]] = sent.get(row["key"], 0) + 1
    assert sent == dict.fromkeys(ids, 1), {key: n for key, n in sent.items() if n != 1}
    return actions


def slow_spec(kind: str = SLOW) -> KindSpec:
    spec = parse_kinds(sandbox_kinds_text("http://127.0.0.1:1", STACK.kinds), "test").get(kind)
    assert spec is not None
    return spec


def test_the_kinds_queue_slots_and_its_shared_budget_add_up_to_its_cap() -> None:
    spec = slow_spec()
    assert spec.max_in_flight == CAP
    assert queue_slots(spec) + shared_budget(spec) == CAP and queue_slots(spec) >= 1


def test_a_slow_kinds_backlog_leaves_other_kinds_at_their_usual_latency(
    module_api: httpx.Client, truth: Sandbox
) -> None:
    alone = booking_latencies(module_api, 10)
    fault = hold_every_refund(truth)
    # More than the 200 activity slots and 200 connections every kind shared before the bulkheads.
    ids = request_slow(module_api, 250)
    spec = slow_spec()
    # The worker's slots of the slow kind are all taken; the rest of its backlog waits in Temporal.
    wait_for(lambda: len(held(truth)) >= queue_slots(spec), 120, "the slow kind's slots to fill")
    beside = booking_latencies(module_api, 10)
    peak = peak_open(truth, spec.timeout_s)
    assert peak <= CAP + shared_budget(spec), f"{peak} requests of the slow kind open at its service"
    states = [module_api.get(f"/v1/actions/{i}").json()["state"] for i in ids]
    assert set(states) <= {"running", "requested"}, (
        "every slow action is in progress while its requests are held"
    )
    assert states.count("requested") >= len(ids) - 2 * CAP, "those beyond the cap wait, queued, unsent"
    assert_usual_latency(alone, beside)
    settle_all(module_api, truth, fault, ids)


def test_actions_beyond_the_cap_wait_queued_and_one_cancelled_there_is_never_sent(
    module_api: httpx.Client, truth: Sandbox
) -> None:
    spec = slow_spec()
    fault = hold_every_refund(truth)
    ids = request_slow(module_api, 30)
    wait_for(lambda: len(held(truth)) >= queue_slots(spec), 120, "the slow kind's slots to fill")

    def queued() -> list[dict[str, Any]] | None:
        actions = [status(module_api, i) for i in ids]
        return [a for a in actions if a["state"] == "requested"] or None

    waiting = wait_for(queued, 60, "actions beyond the cap to wait, queued")
    for action in waiting:
        assert "queued behind others to the same service" in action["say"], action["say"]
        assert (action["dispatched"], action["attempts"], action["claim"]) == (False, 0, "in_progress")
    victim = waiting[0]["operation_id"]
    cancel = module_api.post(f"/v1/actions/{victim}/cancel", json={"by": "caller"}, params={"wait": 5})
    assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled", cancel.text
    settle_all(module_api, truth, fault, [i for i in ids if i != victim])
    assert truth.writes(victim) == [] and status(module_api, victim)["state"] == "cancelled"


def test_a_queued_send_reads_sent_once_taken_and_one_amended_while_it_waits_goes_as_amended(
    module_stack: Stack, module_api: httpx.Client, truth: Sandbox
) -> None:
    """A send waiting in its kind's queue is marked sending by Temporal's own record that the kind's
    worker took it: reads show it `running` from then, an amend is refused and a cancel is too late to
    take it back, and the queued path costs one workflow task more than the direct one, with no update. An
    amend while it waits takes it back and sends the amended params, once."""
    spec = slow_spec()
    fault = hold_every_refund(truth)
    ids = request_slow(module_api, 30)
    wait_for(lambda: len(held(truth)) >= queue_slots(spec), 120, "the slow kind's slots to fill")
    taken = []
    for key in {row["key"] for row in held(truth)}:
        action = status(module_api, key)
        assert (action["state"], action["dispatched"], action["claim"]) == ("running", True, "in_progress")
        assert "queued" not in action["say"], action["say"]
        taken += [key] if _was_queued(action) else []
    # A cancel once the kind's worker took the send is too late to take it back: the write is
    # answered first, as for any request in flight.
    late = taken[0]
    response = module_api.post(f"/v1/actions/{late}/amend", json={"params": {**REFUND, "amount": 9}})
    assert response.status_code == 409 and response.json()["error"]["code"] == "already_dispatched"
    response = module_api.post(f"/v1/actions/{late}/cancel", json={"by": "caller"})
    assert response.status_code == 200, response.text
    assert (response.json()["state"], response.json()["cancel_requested"]) == ("running", True)

    def queued() -> list[dict[str, Any]] | None:
        actions = [status(module_api, i) for i in ids]
        return [a for a in actions if a["state"] == "requested"] or None

    victim = wait_for(queued, 60, "actions beyond the cap to wait, queued")[0]["operation_id"]
    amended = {**REFUND, "amount": 7}
    response = module_api.post(f"/v1/actions/{victim}/amend", json={"params": amended})
    assert response.status_code == 200, response.text
    assert response.json()["params"] == amended and response.json()["state"] in ("requested", "running")
    actions = settle_all(module_api, truth, fault, [op for op in ids if op != late])
    assert [record["payload"]["amount"] for record in truth.records(victim)] == [7]
    late_answer = wait_state(module_api, late, "confirmed", timeout_s=TAKEOVER_S)
    # Sent once and answered; a slow refund cannot be reversed, and its sentence says so.
    assert late_answer["cancel_requested"] and len(truth.writes(late)) == 1, late_answer
    assert "came too late" in late_answer["say"], late_answer["say"]
    assert status(module_api, victim)["params"] == amended

    settled = {a["operation_id"]: a for a in actions}
    costs = asyncio.run(_costs(module_stack, list(settled)))
    assert all(cost.updates == 0 for op, cost in costs.items() if op != victim), costs  # but its amend
    went_queued = [op for op, a in settled.items() if _was_queued(a) and op != victim]
    direct = min(costs[op].workflow_tasks for op, a in settled.items() if not _was_queued(a))
    assert went_queued and all(costs[op].workflow_tasks <= direct + 1 for op in went_queued), costs


def _was_queued(action: dict[str, Any]) -> bool:
    return any(entry["event"] == "queued" for entry in action["log"])


async def _costs(stack: Stack, operation_ids: list[str]) -> dict[str, Cost]:
    """What each action's history cost the engine (its workflow tasks and updates among it)."""
    client = await Client.connect(stack.temporal_address)
    costs = await asyncio.gather(
        *(history_cost(client, action_workflow_id(None, op)) for op in operation_ids)
    )
    return dict(zip(operation_ids, costs, strict=True))


def test_in_task_calls_of_a_slow_kind_fall_back_to_its_queue_within_the_cap(
    module_api: httpx.Client, truth: Sandbox
) -> None:
    """Callers that wait longer than the kind's timeout get in-task calls, at most `shared_budget` at
    once per process (the workflow task slots they hold stay few); the others are sent on the kind's
    queue."""
    spec = slow_spec(WAITED)
    alone = booking_latencies(module_api, 5)
    fault = hold_every_refund(truth)
    ids = [new_id("slow-waiting") for _ in range(30)]
    with ThreadPoolExecutor(len(ids)) as pool:
        calls = [
            pool.submit(create, module_api, WAITED, REFUND, operation_id=operation_id, wait=25)
            for operation_id in ids
        ]
        wait_for(lambda: len(held(truth)) >= queue_slots(spec), 120, "the slow kind's slots to fill")
        beside = booking_latencies(module_api, 5)
        peak = peak_open(truth, spec.timeout_s)
        assert peak <= queue_slots(spec) + 2 * shared_budget(spec), peak
        assert_usual_latency(alone, beside)
        settle_all(module_api, truth, fault, ids)
        for call in calls:
            assert call.result().status_code in (200, 201)


def test_a_worker_killed_with_full_slots_loses_nothing_and_sends_nothing_twice(
    module_stack: Stack, module_api: httpx.Client, truth: Sandbox
) -> None:
    spec = slow_spec()
    fault = hold_every_refund(truth)
    ids = request_slow(module_api, 40)
    wait_for(lambda: len(held(truth)) >= queue_slots(spec), 120, "the slow kind's slots to fill")
    in_flight = {row["key"] for row in held(truth)}
    assert queue_slots(spec) <= len(in_flight) <= CAP + shared_budget(spec)
    module_stack.children["worker"].kill()
    module_stack.start_worker()

    # The requests the dead worker had sent become `unknown` (its heartbeat stops) and are looked up
    # (the held writes answer 409, in progress, until released), never sent again; the new worker
    # takes the queued ones from the kind's queue and sends each once.
    def lost() -> int:
        return sum(states_seen(status(module_api, key))[-1] == "unknown" for key in in_flight)

    # (Those the API's own worker sent are still waiting for their answer: not lost.)
    wait_for(lambda: lost() >= queue_slots(spec), TAKEOVER_S, "the dead worker's requests to be unknown")
    actions = settle_all(module_api, truth, fault, ids)
    checked = {a["operation_id"] for a in actions if "unknown" in states_seen(a)}
    assert queue_slots(spec) <= len(checked) and checked <= in_flight, (checked, in_flight)
    assert booking_latencies(module_api, 1)


def _pollers(stack: Stack, queue: str, workflows: bool = False) -> set[str]:
    async def ask() -> set[str]:
        client = await Client.connect(stack.temporal_address)
        return await Gateway(client, Kinds({}, "test"), Settings()).pollers(queue, workflows)

    return asyncio.run(ask())


def test_a_worker_with_kinds_serves_only_their_queues(module_stack: Stack) -> None:
    argv = module_stack._python("worker", "--kinds", "room_booking", "--no-workflows")
    log = module_stack.data_dir / "logs" / "worker-bookings-only.log"
    with log.open("ab") as out:
        process = subprocess.Popen(argv, env=module_stack.env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        mine = f"{process.pid}@"
        wait_for(
            lambda: any(p.startswith(mine) for p in _pollers(module_stack, kind_task_queue("room_booking"))),
            30,
            "the --kinds worker to poll its kind's queue",
        )
        assert not any(p.startswith(mine) for p in _pollers(module_stack, kind_task_queue(SLOW)))
        assert not any(p.startswith(mine) for p in _pollers(module_stack, "settled", workflows=True))
        assert not any(p.startswith(mine) for p in _pollers(module_stack, "settled"))
        assert "settled worker: polling 'settled-kind-room_booking' at" in log.read_text()
    finally:
        process.terminate()
        process.wait(10)


def test_an_unknown_kind_name_refuses_to_start(module_stack: Stack) -> None:
    done = subprocess.run(
        module_stack._python("worker", "--kinds", "room_booking,nope"),
        env=module_stack.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "unknown kind nope" in done.stderr and "room_booking" in done.stderr


def test_healthz_needs_a_poller_on_every_kinds_queue(module_stack: Stack, module_api: httpx.Client) -> None:
    # The worker started again by an earlier test may still be opening its polls on a busy machine.
    wait_for(lambda: healthy(module_api), 60, "/healthz to answer 200")
    assert module_stack.config is not None
    kinds = load_kinds(module_stack.config)
    unpolled = parse_kinds(module_stack.config.read_text() + _renamed_copy(SLOW, "nobody_polls_this"), "test")

    async def polling(kinds: Kinds) -> bool:
        client = await Client.connect(module_stack.temporal_address)
        return await Gateway(client, kinds, Settings()).worker_polling()

    assert asyncio.run(polling(kinds)) is True
    assert asyncio.run(polling(unpolled)) is False


def _renamed_copy(name: str, new_name: str) -> str:
    """A kinds-file table for `new_name`: the smallest valid kind, on a queue no worker polls."""
    return (
        f'\n[kinds.{new_name}]\ndescription = "copy of {name}"\n'
        'dispatch = { method = "POST", url = "http://127.0.0.1:1/refunds" }\n'
    )
