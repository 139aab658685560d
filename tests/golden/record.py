"""Record the golden histories: `python -m tests.golden.record` (or `make golden`).

Starts a real stack, runs each scenario to its verified outcome, and writes each workflow's history
as JSON beside this file.
"""

import asyncio
import json
import tempfile
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import httpx
from temporalio.client import Client, WorkflowExecutionStatus

from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id, conversation_workflow_id
from tests.e2e.inprocess import closed_idle_conversation
from tests.helpers import (
    BOOKING,
    PAYOUT,
    REFUND,
    SERVICE_KINDS,
    TEST_KINDS,
    Sandbox,
    create,
    wait_for,
    wait_state,
)

HERE = Path(__file__).parent
# Each recording generation keeps its own files: histories recorded by older code stay, so their
# replay proves that runs started before a patch still replay. `golden-` was recorded before the
# in-task business calls and the one idle timer; `golden2-` after them (and `golden2-early-404`,
# recorded before the commit horizon, re-sends at once); `golden3-` after the commit horizon;
# `golden4-` since actions start by a plain start (eagerly, in the API's worker) at the current
# revision, whose runs take the patched paths without recording patch markers; `golden5-` since
# actions no longer signal their conversation (QUIET_REVISION) and number their changes in the memo;
# `golden6-` since a new action starts its conversation lazily (LAZY_REVISION), with
# `golden6-lazy-conversation`: one that nothing woke, whose first task ran when its delay ran out;
# `golden7-` since the rules for real services (SERVICES_REVISION), with `golden7-reversal-lookup` (a
# reversal whose answer was lost, looked up instead of re-sent) and `golden7-accepted` (a payout the
# service accepted and finished later); `golden8-` since a queued send is marked sending by its
# worker taking it (QUEUE_REVISION), with `golden8-queued-cancelled` and `golden8-queued-amended`
# (queued sends taken back by a cancel and by an amend); `golden9-` since an unchanged deadline keeps
# its timer and the state attribute is written only for states operators act on (LEAN_REVISION);
# `golden10-` since a send whose answer is lost is looked up in its own business call (`golden10-lost`
# and `golden10-lost-in-task` confirmed by that lookup, `golden10-lost-looked-up-later` where it got no
# answer: `unknown`, then confirmed by the usual lookup) and a settled action's run closes after its
# linger, a late control opening it again (CLOSING_REVISION): `golden10-lingered` (a booking's run
# that settled, lingered and closed with its record) and `golden10-reopened` (the run a late cancel
# opened from it, which reversed the booking and closed again). Since CLOSING_REVISION too, a control
# that waits for its outcome is answered at once and its caller awaits the outcome in the history:
# golden10's waiting cancels start no timer of their own.
GENERATION = "golden10"
CONVERSATION = f"{GENERATION}-conversation"
LAZY_CONVERSATION = f"{GENERATION}-lazy-conversation"
# Its idle period, short enough to record (the real one is 30 days).
LAZY_IDLE = timedelta(seconds=3)
# A booking whose settled run lingers seconds, not a minute, so that a late control finds it closed.
LINGERING_KINDS = {
    "quick_booking": TEST_KINDS["room_booking"].but(
        close_after_settled_s=2.0, redact_params_after_s=None, requires_authorization=None
    )
}
CLOSE_WITHIN_S = 60.0


def normal(api: httpx.Client, _: Sandbox) -> str:
    op = create(
        api, "room_booking", BOOKING, operation_id=f"{GENERATION}-normal", conversation_id=CONVERSATION
    ).json()
    api.post(f"/v1/actions/{op['operation_id']}/authorize", json={"by": "caller"}, params={"wait": 10})
    api.post(
        f"/v1/actions/{GENERATION}-normal/presented",
        json={"channel": "voice", "text": "Room Ada…", "completed": False},
    )
    return f"{GENERATION}-normal"


def response_lost(api: httpx.Client, sandbox: Sandbox) -> str:
    sandbox.fault("bookings", "create", "drop_after_apply", f"{GENERATION}-lost")
    create(
        api,
        "room_booking",
        BOOKING,
        operation_id=f"{GENERATION}-lost",
        conversation_id=CONVERSATION,
        authorized=True,
    )
    wait_state(api, f"{GENERATION}-lost", "confirmed")
    return f"{GENERATION}-lost"


def lost_looked_up_later(api: httpx.Client, sandbox: Sandbox) -> str:
    """The lookup the send's own call makes at once gets no answer (503): `unknown` until the next one."""
    op = f"{GENERATION}-lost-looked-up-later"
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503)
    create(api, "refund", REFUND, operation_id=op, conversation_id=CONVERSATION, authorized=True)
    wait_state(api, op, "confirmed")
    return op


def not_applied(api: httpx.Client, sandbox: Sandbox) -> str:
    sandbox.fault("refunds", "create", "fail_before_apply", f"{GENERATION}-resend", status=503)
    create(
        api,
        "refund",
        REFUND,
        operation_id=f"{GENERATION}-resend",
        conversation_id=CONVERSATION,
        authorized=True,
    )
    wait_state(api, f"{GENERATION}-resend", "confirmed")
    return f"{GENERATION}-resend"


def cancel_in_flight(api: httpx.Client, sandbox: Sandbox) -> str:
    hold = sandbox.fault("bookings", "create", "hold", f"{GENERATION}-cancel", apply=True)
    create(
        api,
        "room_booking",
        BOOKING,
        operation_id=f"{GENERATION}-cancel",
        conversation_id=CONVERSATION,
        authorized=True,
    )
    sandbox.wait_held(f"{GENERATION}-cancel")
    api.post(f"/v1/actions/{GENERATION}-cancel/cancel", json={"by": "caller"})
    sandbox.release(hold)
    wait_state(api, f"{GENERATION}-cancel", "cancelled")
    return f"{GENERATION}-cancel"


def amended(api: httpx.Client, _: Sandbox) -> str:
    create(api, "room_booking", BOOKING, operation_id=f"{GENERATION}-amend", conversation_id=CONVERSATION)
    api.post(f"/v1/actions/{GENERATION}-amend/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    api.post(f"/v1/actions/{GENERATION}-amend/authorize", params={"wait": 10})
    return f"{GENERATION}-amend"


def lost_in_task(api: httpx.Client, sandbox: Sandbox) -> str:
    """The caller waits for the answer: the send runs inside the workflow task."""
    op = f"{GENERATION}-lost-in-task"
    sandbox.fault("bookings", "create", "drop_after_apply", op)
    create(
        api, "room_booking", BOOKING, operation_id=op, conversation_id=CONVERSATION, authorized=True, wait=10
    )
    wait_state(api, op, "confirmed")
    return op


def lookup_in_task(api: httpx.Client, sandbox: Sandbox) -> str:
    """A reconcile that waits for the answer: the lookup runs inside the workflow task (the one the send's
    own call made got no answer)."""
    op = f"{GENERATION}-lookup-in-task"
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503)
    create(api, "refund_slow", REFUND, operation_id=op, conversation_id=CONVERSATION, wait=10)
    api.post(f"/v1/actions/{op}/reconcile", params={"wait": 10})
    wait_state(api, op, "confirmed")
    return op


def early_404(api: httpx.Client, sandbox: Sandbox) -> str:
    """A service without deduplication, a request not applied, a 404 soon after: recorded before the
    commit horizon this re-sends at once; after it, the 404 waits for the horizon (patch commit-horizon)."""
    op = f"{GENERATION}-early-404"
    sandbox.fault("refunds", "create", "fail_before_apply", op, status=503)
    create(api, "refund_nodedup", REFUND, operation_id=op, conversation_id=CONVERSATION)
    wait_state(api, op, "confirmed")
    return op


def reversal_lookup(api: httpx.Client, sandbox: Sandbox) -> str:
    op = f"{GENERATION}-reversal-lookup"
    create(api, "unkeyed_booking", BOOKING, operation_id=op, conversation_id=CONVERSATION, wait=10)
    sandbox.fault("bookings", "cancel", "drop_after_apply", op)
    api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"})
    wait_state(api, op, "cancelled")
    return op


def accepted(api: httpx.Client, sandbox: Sandbox) -> str:
    op = f"{GENERATION}-accepted"
    sandbox.http.put("/_sandbox/transfers", json={"settle_after_s": 3600})
    answer = create(api, "transfer", PAYOUT, operation_id=op, conversation_id=CONVERSATION, wait=3).json()
    sandbox.http.put("/_sandbox/transfers", json={})
    sandbox.http.post(f"/_sandbox/transfers/{answer['business_ref']}/finish")
    wait_state(api, op, "confirmed")
    return op


async def _closed_run(stack: Stack, workflow_id: str) -> str:
    """The run id of the workflow id's latest run, once it has completed."""
    client = await Client.connect(stack.temporal_address)
    handle = client.get_workflow_handle(workflow_id)
    deadline = asyncio.get_running_loop().time() + CLOSE_WITHIN_S
    while (described := await handle.describe()).status is not WorkflowExecutionStatus.COMPLETED:
        assert asyncio.get_running_loop().time() < deadline, f"{workflow_id} did not close"
        await asyncio.sleep(0.2)
    return described.run_id


def reopened(stack: Stack, api: httpx.Client) -> list[tuple[str, str, str]]:
    """A booking that settles and closes after its linger, then a late cancel that opens it again and
    reverses it: (workflow id, run id, name) of both runs."""
    op = f"{GENERATION}-lingered"
    workflow_id = action_workflow_id(None, op)
    create(api, "quick_booking", BOOKING, operation_id=op, conversation_id=CONVERSATION, wait=10)
    wait_state(api, op, "confirmed")
    first = asyncio.run(_closed_run(stack, workflow_id))
    api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 10})
    wait_state(api, op, "cancelled")
    second = asyncio.run(_closed_run(stack, workflow_id))
    return [(workflow_id, first, op), (workflow_id, second, f"{GENERATION}-reopened")]


SCENARIOS: list[Callable[[httpx.Client, Sandbox], str]] = [
    normal,
    response_lost,
    lost_in_task,
    lost_looked_up_later,
    lookup_in_task,
    not_applied,
    cancel_in_flight,
    amended,
    early_404,
    reversal_lookup,
    accepted,
]


async def export(stack: Stack, workflow_ids: list[str], runs: Sequence[tuple[str, str, str]] = ()) -> None:
    """Each workflow's latest run as NAME.json (its id without the prefix), and each (workflow id, run
    id, name) of `runs` as name.json."""
    client = await Client.connect(stack.temporal_address)
    latest = [(workflow_id, None, workflow_id.split(":", 1)[1]) for workflow_id in workflow_ids]
    for workflow_id, run_id, name in [*latest, *runs]:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        (HERE / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {name}.json ({len(history.events)} events)")


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        Stack.on_free_ports(
            Path(folder), {**TEST_KINDS, **SERVICE_KINDS, **LINGERING_KINDS}, ui=False
        ).running() as stack,
    ):
        with (
            httpx.Client(base_url=stack.api_url, timeout=30) as api,
            httpx.Client(base_url=stack.sandbox_url) as sb,
        ):
            ops = [scenario(api, Sandbox(sb)) for scenario in SCENARIOS]
            runs = reopened(stack, api)
            api.post(
                f"/v1/conversations/{CONVERSATION}/events",
                json={"type": "channel_closed", "channel": "voice", "reason": "dropped"},
            )
            api.post(
                f"/v1/conversations/{CONVERSATION}/events",
                json={"type": "channel_opened", "channel": "text"},
            )
        asyncio.run(closed_idle_conversation(stack, LAZY_CONVERSATION, f"{GENERATION}-lazy", LAZY_IDLE))
        ids = [action_workflow_id(None, op) for op in ops] + [
            conversation_workflow_id(None, name) for name in (CONVERSATION, LAZY_CONVERSATION)
        ]
        asyncio.run(export(stack, ids, runs))


# Recorded apart from the generations (`python -m tests.golden.record bulkheads`): a call refused on
# the shared worker because its kind had no more room there (settled.activities.lanes), then sent on
# the kind's own queue: inside the workflow task (`bulkheads-in-task-refused`), or on the shared queue
# (`bulkheads-lane-full`). The kind's cap (max_in_flight 2) leaves it no room on the shared worker.
BULKHEAD_KINDS = {
    "one_at_a_time": TEST_KINDS["room_booking"].but(requires_authorization=None, max_in_flight=2)
}


def record_bulkheads() -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        Stack.on_free_ports(Path(folder), BULKHEAD_KINDS, ui=False).running() as stack,
        httpx.Client(base_url=stack.api_url, timeout=30) as api,
    ):
        ops = []
        for op, wait in (("bulkheads-in-task-refused", 10), ("bulkheads-lane-full", None)):
            create(api, "one_at_a_time", BOOKING, operation_id=op, conversation_id="bulkheads", wait=wait)
            wait_state(api, op, "confirmed")
            ops.append(op)
        asyncio.run(export(stack, [action_workflow_id(None, op) for op in ops]))


def record_queued() -> None:
    """`python -m tests.golden.record queued`: a send refused on the shared worker waits `requested`
    (queued) in its kind's queue until the kind's worker takes it, then is sent (`golden8-queued`);
    with the kind's worker busy with two held sends, one waiting is taken back by a cancel
    (`golden8-queued-cancelled`, never sent) and one by an amend (`golden8-queued-amended`, sent as
    amended)."""
    with (
        tempfile.TemporaryDirectory() as folder,
        Stack.on_free_ports(Path(folder), BULKHEAD_KINDS, ui=False).running() as stack,
        httpx.Client(base_url=stack.api_url, timeout=30) as api,
        httpx.Client(base_url=stack.sandbox_url) as sb,
    ):
        sandbox = Sandbox(sb)
        op = f"{GENERATION}-queued"
        create(api, "one_at_a_time", BOOKING, operation_id=op, conversation_id="queued")
        wait_state(api, op, "confirmed")
        holders = [f"{GENERATION}-holder-{n}" for n in range(2)]
        faults = [sandbox.fault("bookings", "create", "hold", key, apply=True) for key in holders]
        for key in holders:
            create(api, "one_at_a_time", BOOKING, operation_id=key, conversation_id="queued")
            sandbox.wait_held(key)
        cancelled, amended = f"{GENERATION}-queued-cancelled", f"{GENERATION}-queued-amended"
        for key in (cancelled, amended):
            create(api, "one_at_a_time", BOOKING, operation_id=key, conversation_id="queued")
            wait_for(lambda key=key: _queued(api, key), 20, f"{key} to wait in its kind's queue")
        api.post(f"/v1/actions/{cancelled}/cancel", json={"by": "caller"}, params={"wait": 10})
        wait_state(api, cancelled, "cancelled")
        api.post(f"/v1/actions/{amended}/amend", json={"params": {**BOOKING, "day": "Friday"}})
        for fault in faults:
            sandbox.release(fault)
        for key in (*holders, amended):
            wait_state(api, key, "confirmed")
        asyncio.run(export(stack, [action_workflow_id(None, key) for key in (op, cancelled, amended)]))


def _queued(api: httpx.Client, operation_id: str) -> bool:
    log = api.get(f"/v1/actions/{operation_id}").json()["log"]
    return any(entry["event"] == "queued" for entry in log)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["bulkheads"]:
        record_bulkheads()
    elif sys.argv[1:] == ["queued"]:
        record_queued()
    else:
        main()
