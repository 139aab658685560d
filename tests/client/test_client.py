"""settled.client against the real stack: typed answers, typed errors, safe retries, the stream, and
"what may I say" from verified state. The sandbox's records are checked apart from what the API says."""

import asyncio
from contextlib import aclosing

import pytest

from settled.client import CreatedAction, SettledAPIError, SettledClient, SettledUnreachable
from settled.domain.handoff import Handoff
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.runtime.stack import Stack, free_port
from tests.client.support import AsyncSandbox, LosingProxy, new_id, refund


async def test_create_answers_a_typed_status_and_a_repeat_is_the_same_action(
    settled: SettledClient, truth: AsyncSandbox
) -> None:
    conversation, params = new_id("conv"), refund()
    first = await settled.create_action(conversation, "refund", params)
    assert isinstance(first, CreatedAction) and isinstance(first, ActionStatus)
    assert first.created is True and first.operation_id.startswith("op_")
    assert (first.state, first.claim, first.authorized) == (State.REQUESTED, "in_progress", False)

    again = await settled.create_action(conversation, "refund", params, operation_id=first.operation_id)
    assert again.created is False and again.operation_id == first.operation_id

    done = await settled.authorize(first.operation_id, by="caller", wait=10)
    records = await truth.refunds_for(params["order_id"])
    assert done.state is State.CONFIRMED and len(records) == 1
    assert done.business_ref == records[0]["id"] and done.business_ref in done.say
    assert (await settled.get(first.operation_id)).history[-1].state is State.CONFIRMED


async def test_errors_carry_the_contract_code_and_status(settled: SettledClient) -> None:
    conversation, params = new_id("conv"), refund()
    op = (await settled.create_action(conversation, "refund", params)).operation_id
    cases = [
        (settled.create_action(conversation, "refund", {**params, "amount": 1.0}, operation_id=op), 409),
        (settled.create_action(conversation, "no_such_kind", params), 422),
        (settled.create_action(conversation, "refund", {"order_id": "o"}), 422),
        (settled.get(new_id()), 404),
    ]
    codes = []
    for call, status in cases:
        with pytest.raises(SettledAPIError) as raised:
            await call
        assert raised.value.status == status
        codes.append(raised.value.code)
    assert codes == ["operation_conflict", "unknown_kind", "invalid_params", "not_found"]


async def test_a_lost_answer_is_retried_with_the_same_operation_id_and_writes_once(
    settled: SettledClient, truth: AsyncSandbox, stack: Stack
) -> None:
    params = refund()
    port = int(stack.api_url.rsplit(":", 1)[1])
    async with (
        LosingProxy(port, lose=1).running() as proxy,
        SettledClient(proxy.url, backoff_s=0.05) as flaky,
    ):
        action = await flaky.create_action(new_id("conv"), "refund", params, authorized=True, wait=5)
    assert proxy.requests == 2  # the first answer was lost after the API had acted on it
    assert action.created is False  # the retry met the action its own first attempt created
    assert action.state is State.CONFIRMED
    records = await truth.refunds_for(params["order_id"])
    assert len(records) == 1 and records[0]["key"] == action.operation_id
    assert len(await truth.writes(action.operation_id)) == 1


async def test_an_unreachable_api_is_a_typed_error_after_the_retries() -> None:
    async with SettledClient(f"http://127.0.0.1:{free_port()}", retries=2, backoff_s=0.01) as nowhere:
        with pytest.raises(SettledUnreachable) as raised:
            await nowhere.create_action("c", "refund", refund())
    assert raised.value.code == "unreachable"


async def test_what_may_i_say_reconciles_an_unknown_outcome_before_answering(
    settled: SettledClient, truth: AsyncSandbox
) -> None:
    conversation, op, params = new_id("conv"), new_id(), refund()
    await truth.fault("refunds", "create", "drop_after_apply", op)
    lookups = await truth.fault("refunds", "lookup", "fail_before_apply", op, status=503, count=0)
    # A service without deduplication: settled may only look up, never re-send blindly.
    created = await settled.create_action(conversation, "refund_nodedup", params, operation_id=op, wait=3)
    assert created.state is State.UNKNOWN and created.claim == "unknown"
    honest = await settled.what_may_i_say(op, wait=0.5)
    assert honest.claim == "unknown" and "haven't confirmed" in honest.say

    await truth.release(lookups)
    verdict = await settled.what_may_i_say(op, wait=5)
    records = await truth.refunds_for(params["order_id"])
    assert (verdict.state, verdict.claim) == (State.CONFIRMED, "done")
    assert len(records) == 1 and verdict.business_ref == records[0]["id"] in verdict.say

    whole = await settled.what_may_i_say_in(conversation, wait=1)
    assert whole.work == "stopped" and [v.operation_id for v in whole.actions] == [op]
    assert records[0]["id"] in whole.say


async def test_stream_yields_every_change_and_handoff_is_typed(
    settled: SettledClient, truth: AsyncSandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    hold = await truth.fault("refunds", "create", "hold", op, apply=True, status=200)
    await settled.create_action(conversation, "refund", refund(), operation_id=op, authorized=True)
    await truth.wait_held(op)
    seen: list[State] = []
    live = asyncio.Event()

    async def watch() -> None:
        async with aclosing(settled.stream(conversation)) as events:
            async for status in events:
                seen.append(status.state)
                live.set()
                if status.state is State.CONFIRMED:
                    return

    watching = asyncio.create_task(watch())
    await asyncio.wait_for(live.wait(), 10)  # the stream has sent the current state
    await settled.conversation_event(conversation, "channel_opened", "voice")
    await truth.release(hold)
    await asyncio.wait_for(watching, 20)
    assert seen[0] in (State.RUNNING, State.UNKNOWN) and seen[-1] is State.CONFIRMED  # unknown: timed out

    await settled.conversation_event(conversation, "channel_closed", "voice", "hangup")
    handoff = await settled.handoff(conversation)
    assert isinstance(handoff, Handoff)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "hangup"
    assert handoff.work == "stopped" and handoff.actions[0].operation_id == op

    # The channel's own words for the confirmed status, spoken to the end: nothing is owed.
    await settled.presented(
        op, "voice", "All done, it's refunded.", completed=True, for_state=State.CONFIRMED
    )
    assert (await settled.handoff(conversation)).say == ""
