"""Late controls of a closed action on the real Temporal dev server, whose deduplication of starts by
request id (the creating request id of the workflow id's current run, running or closed) is what keeps
two late controls from opening two runs: two concurrent late cancels make one new run and one
reversal at the service, and a control whose read of the last run went stale lands on the newer run,
then reads again, and never starts a run from the older record."""

import asyncio
import json
from typing import Any

import httpx
from settled.bench.actions import billed_in_history
from settled.gateway.errors import GatewayError
from settled.gateway.gateway import Gateway
from settled.gateway.reopening import ClosedRun, LastRun, Reopening, start_reopened
from settled.gateway.runs import every_run
from settled.workflows.action import ActionWorkflow
from settled.workflows.messages import ActionStart, Present
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from settled.domain.kinds import PLAIN_BOOKING_PARAMS, Variant
from settled.domain.models import ActionStatus
from settled.runtime.stack import Stack
from settled.temporal.identity import action_workflow_id
from tests.client.support import eventually
from tests.e2e.conftest import StackOptions
from tests.e2e.inprocess import gateway_on
from tests.e2e.test_cli import settled
from tests.helpers import BOOKING, FAST, Sandbox, create, new_id, wait_for

# A booking whose settled run lingers a few seconds (the real linger is a minute): long enough for a
# reopened run's start to be made within half of it on a busy machine, short enough to wait for.
LINGER_S = 8.0
STACK = StackOptions(
    {
        "quick_booking": Variant(
            "room_booking",
            {
                **FAST,
                "requires_authorization": None,
                "say": None,
                "params_schema": PLAIN_BOOKING_PARAMS,
                "close_after_settled_s": LINGER_S,
            },
        )
    }
)
CLOSE_WITHIN_S = 60.0


def _booked(api: httpx.Client, op: str) -> dict[str, Any]:
    answer = create(api, "quick_booking", BOOKING, operation_id=op, conversation_id=new_id("conv"), wait=5)
    assert answer.status_code == 201 and answer.json()["state"] == "confirmed", answer.text
    return dict(answer.json())


async def _closed(gateway: Gateway, op: str) -> WorkflowExecutionDescription:
    handle = gateway.client.get_workflow_handle(action_workflow_id(None, op))

    async def closed() -> WorkflowExecutionDescription | None:
        described = await handle.describe()
        return described if described.status is WorkflowExecutionStatus.COMPLETED else None

    return await eventually(closed, timeout_s=CLOSE_WITHIN_S, what=f"{op}'s run to close")


async def test_two_concurrent_late_cancels_open_one_run_and_reverse_once(
    module_stack: Stack, module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    gateway = await gateway_on(module_stack)
    op = new_id()
    booked = _booked(module_api, op)
    first = await _closed(gateway, op)

    async with httpx.AsyncClient(base_url=module_stack.api_url, timeout=30) as api:
        answers = await asyncio.gather(
            *(api.post(f"/v1/actions/{op}/cancel", json={"by": by}, params={"wait": 10}) for by in "ab")
        )
    assert [answer.status_code for answer in answers] == [200, 200], [answer.text for answer in answers]

    def reversed_once() -> dict[str, Any] | None:
        status = module_api.get(f"/v1/actions/{op}").json()
        return status if (status["state"], status["compensated"]) == ("cancelled", True) else None

    final = await eventually(lambda: asyncio.to_thread(reversed_once), what="the reversal")
    assert final["business_ref"] == booked["business_ref"]
    # The service's own records: one reversal of the one booking.
    assert len(module_sandbox.requests(op, "cancel")) == 1
    [record] = module_sandbox.records(op)
    assert record["cancelled_at"] is not None, record

    # One run opened from the closed one, and it closes again after its linger: two runs in all.
    second = await _closed(gateway, op)
    assert second.run_id != first.run_id
    runs = await every_run(gateway.client, action_workflow_id(None, op))
    assert [run.run_id for run in runs] == [first.run_id, second.run_id]
    # The bench counts both runs' Actions: two starts, and the reversal's activity.
    billed = await billed_in_history(gateway.client, action_workflow_id(None, op))
    assert billed.counts["workflow started"] == 2 and billed.counts["activity"] >= 1, billed.counts
    # An operator's replay of the action replays both runs; its listing shows it once, as it is now.
    replayed = await asyncio.to_thread(settled, module_stack, "replay", op, "--json")
    assert json.loads(replayed.stdout) == {"replayed": 2, "failed": 0, "failures": []}, replayed.stderr

    def listed() -> list[dict[str, Any]] | None:
        rows = json.loads(settled(module_stack, "list", "--json").stdout)
        mine = [row for row in rows if row["operation_id"] == op]
        return mine if mine and mine[0]["state"] == "cancelled" else None

    [row] = await asyncio.to_thread(wait_for, listed, 30.0, "the listing to show the cancelled action")
    assert row["open"] is False


class _StaleOnce(Reopening):
    """A reopening whose first read is an older one: the last run as it was before another control
    opened the action again."""

    def __init__(self, gateway: Gateway, stale: LastRun) -> None:
        super().__init__(gateway.link)
        self.stale: LastRun | None = stale
        self.reads = 0

    async def read(self, handle: Any) -> LastRun:
        self.reads += 1
        stale, self.stale = self.stale, None
        return stale if stale is not None else await super().read(handle)


async def test_a_reopening_from_a_stale_read_lands_on_the_newer_run_and_reads_again(
    module_stack: Stack, module_api: httpx.Client
) -> None:
    gateway = await gateway_on(module_stack)
    op = new_id()
    workflow_id = action_workflow_id(None, op)
    handle = gateway.link.action(None, op)
    _booked(module_api, op)
    await _closed(gateway, op)
    stale = await Reopening(gateway.link).read(handle)
    assert stale.closed is not None and not stale.running

    # Another control opens it again meanwhile (a presentation), and that run closes too.
    said = {"channel": "voice", "text": "It is booked.", "completed": True}
    assert module_api.post(f"/v1/actions/{op}/presented", json=said).status_code == 200
    second = await _closed(gateway, op)
    assert second.run_id != stale.run_id

    # A start from the stale read lands on the newer run, closed as it is: nothing starts.
    assert await start_reopened(gateway.link, workflow_id, stale.closed, 5.0) == second.run_id
    assert (await handle.describe()).run_id == second.run_id

    # A control that read stale: its start lands on the closed newer run, its update finds no run,
    # and it reads again and opens the action from the newer record.
    later = Present(channel="text", text="Booked for Thursday.", completed=True)

    async def send() -> ActionStatus:
        return await gateway.link.guard(lambda: handle.execute_update(ActionWorkflow.presented, later))

    reopening = _StaleOnce(gateway, stale)
    status = await reopening.send(handle, lambda record, now: None, send)
    assert status is not None and status.presented is not None and status.presented.text == later.text
    assert reopening.reads == 2
    runs = await every_run(gateway.client, workflow_id)
    assert [run.run_id for run in runs][:2] == [stale.run_id, second.run_id] and len(runs) == 3
    started = runs[2].events[0].workflow_execution_started_event_attributes
    [start] = await gateway.client.data_converter.decode(started.input.payloads, [ActionStart])
    assert start.reopens == second.run_id
    # It carried the newer record: the presentation the second run recorded.
    assert start.carried is not None and start.carried.presented is not None
    assert start.carried.presented.text == said["text"]


async def test_past_its_window_nothing_is_opened(module_stack: Stack, module_api: httpx.Client) -> None:
    """The window is the record's: a read whose record says it has passed opens nothing."""
    gateway = await gateway_on(module_stack)
    op = new_id()
    handle = gateway.link.action(None, op)
    _booked(module_api, op)
    closed = await _closed(gateway, op)
    last = await Reopening(gateway.link).read(handle)
    assert last.closed is not None
    record = last.closed.record.model_copy(
        update={"kind": last.closed.record.kind.model_copy(update={"keep_open_after_settled_s": 1.0})}
    )
    expired = LastRun(last.run_id, running=False, closed=ClosedRun(last.run_id, record))

    async def send() -> ActionStatus:
        raise GatewayError("not_found", "closed")

    assert await _StaleOnce(gateway, expired).send(handle, lambda record, now: None, send) is None
    assert (await handle.describe()).run_id == closed.run_id
