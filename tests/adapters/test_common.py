"""The framework-free core every adapter shares, against the real stack: one request one action,
a new action only after a definite "not done", truthful tool text, and presentations that never
claim a state the channel did not speak."""

import asyncio

import pytest
from settled.adapters.common import (
    ActionKind,
    SettledChannel,
    action_kinds,
    carries,
    derived_operation_id,
    error_answer,
    load_action_kinds,
    tool_answer,
)

from settled.client import SettledAPIError, SettledClient
from settled.domain.models import ActionStatus
from settled.domain.states import State
from tests.adapters.conftest import SentClient
from tests.client.support import AsyncSandbox, eventually, new_id, refund


def test_derived_ids_are_stable_per_request_and_valid() -> None:
    a = derived_operation_id("c-1", "refund", {"amount": 1, "order_id": "o"})
    assert a == derived_operation_id("c-1", "refund", {"order_id": "o", "amount": 1})  # key order
    assert a != derived_operation_id("c-2", "refund", {"amount": 1, "order_id": "o"})
    assert a != derived_operation_id("c-1", "refund", {"amount": 2, "order_id": "o"})
    assert derived_operation_id("c-1", "refund", {}, 3).endswith("-3")
    assert a.startswith("op_") and len(a) <= 128


def test_kinds_load_from_the_kinds_file_and_unknown_names_say_which() -> None:
    kinds = load_action_kinds(names=["refund", "room_booking"])
    assert [kind.name for kind in kinds] == ["refund", "room_booking"]
    assert (
        kinds[0].requires_authorization and "never tell the caller it is done" in kinds[0].tool_description()
    )
    with pytest.raises(KeyError, match="no kind 'nope'"):
        load_action_kinds(names=["nope"])


async def test_kinds_come_from_the_api_as_the_file_declares_them(
    settled: SettledClient, refund_kind: ActionKind
) -> None:
    """An app with the light install offers the kinds without a copy of the kinds file."""
    [refund] = await action_kinds(settled, names=["refund"])
    assert refund == refund_kind
    assert len(await action_kinds(settled)) == len(await settled.kinds())
    with pytest.raises(KeyError, match="no kind 'nope' in the settled API"):
        await action_kinds(settled, names=["nope"])


def test_an_invalid_request_tells_the_model_nothing_was_sent() -> None:
    answer = error_answer(SettledAPIError("invalid_params", "amount: must be > 0", 422))
    assert answer.startswith("Not recorded") and "Nothing was sent" in answer


async def test_each_state_reads_as_what_it_is(
    settled: SettledClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    channel = SettledChannel(settled, new_id("conv"), [refund_kind], wait_s=5)
    waiting = await channel.request("refund", refund())
    assert waiting.state is State.REQUESTED
    assert tool_answer(waiting).startswith("Recorded; nothing has been sent yet")
    done = await channel.authorize(waiting.operation_id)
    text = tool_answer(done)
    assert text.startswith("CONFIRMED") and done.business_ref and done.business_ref in text


async def test_a_repeat_meets_the_same_action_and_a_definite_no_starts_a_new_one(
    settled: SettledClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    channel = SettledChannel(settled, conversation, [refund_kind], wait_s=5, authorize_on_call=True)
    first_id = derived_operation_id(conversation, "refund", params)
    await truth.fault("refunds", "create", "reject", first_id, status=422)
    rejected = await channel.request("refund", params)
    assert rejected.state is State.FAILED and rejected.operation_id == first_id

    # It was never applied, so asking again is a new request (a second round), sent once.
    again = await channel.request("refund", params)
    assert again.operation_id == f"{first_id}-2" and again.state is State.CONFIRMED
    # ... and asking once more meets that confirmed action: no third write.
    third = await channel.request("refund", params)
    assert third.operation_id == again.operation_id and third.attempts == 1
    assert len(await truth.refunds_for(params["order_id"])) == 1
    assert channel.operations == [first_id, again.operation_id]


async def test_a_presentation_of_an_older_state_does_not_count_as_presenting_the_outcome(
    settled: SettledClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    op = derived_operation_id(conversation, "refund", params)
    channel = SettledChannel(settled, conversation, [refund_kind], wait_s=0.2, authorize_on_call=True)
    hold = await truth.fault("refunds", "create", "hold", op, apply=True)
    running = await channel.request("refund", params)
    channel.told(running)  # the model is told "not confirmed yet" ...
    channel.utterance_started("t1")
    channel.utterance_text("t1", running.say)
    await truth.release(hold)
    await eventually(lambda: _confirmed(settled, op), what="the refund confirmed")
    channel.utterance_ended("t1", heard=True)  # ... and finishes saying it after the confirmation
    await channel.aclose()

    action = await settled.get(op)
    assert action.presented is not None and action.presented.text == running.say
    assert running.state in (State.RUNNING, State.UNKNOWN)  # unknown: the service's silence timed out
    assert action.presented.completed and action.presented.for_state is running.state
    assert action.state is State.CONFIRMED
    assert (await settled.handoff(conversation)).say == action.say  # the confirmation is still owed


async def test_only_an_utterance_that_carries_the_outcome_presents_it_and_a_close_cuts_it_first(
    settled: SentClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    conversation, params = new_id("conv"), refund()
    channel = SettledChannel(settled, conversation, [refund_kind], wait_s=5, authorize_on_call=True)
    channel.utterance_started("filler")  # generated before the result: it can carry nothing
    done = await channel.request("refund", params)
    channel.told(done)
    channel.utterance_text("filler", "One moment, I'm taking care of that.")
    channel.utterance_started("holding")  # generated after, but it does not say the outcome
    channel.utterance_text("holding", "I'm still working on that.")
    channel.utterance_started("confirmation")
    channel.utterance_text("confirmation", done.say)
    channel.utterance_ended("filler", heard=True)
    channel.utterance_ended("holding", heard=True)
    channel.utterance_started("holding")  # a late event of an ended utterance does not reopen it
    assert channel.playing == ["confirmation"]
    channel.closed("hangup")  # the caller hangs up while the confirmation plays
    channel.utterance_ended("confirmation", heard=True)  # a late "finished" changes nothing
    await channel.aclose()

    action = await settled.get(done.operation_id)
    assert action.presented is not None and action.presented.text == done.say
    assert action.presented.completed is False and action.presented.for_state is State.CONFIRMED
    assert settled.sent == [("presented", "cut"), ("channel_closed", "hangup")]  # the cut first
    assert (await settled.handoff(conversation)).say == done.say  # owed to the next channel


def test_carrying_means_the_sentence_the_reference_or_the_operation() -> None:
    status = ActionStatus.model_construct(
        operation_id="op_1f2e", say="Done: refunded. Your reference is rf_12.", business_ref="rf_12"
    )
    assert carries("done:  refunded.\nYour reference is rf_12.", status)
    assert carries("Your refund went through, reference RF_12.", status)
    assert carries(f"It is operation {status.operation_id}.", status)
    assert not carries("One moment, I'm taking care of that.", status)
    assert not carries("Done: refunded. Your reference", status)


async def _confirmed(settled: SettledClient, op: str) -> bool:
    return (await settled.get(op)).state is State.CONFIRMED


async def test_channel_events_are_sent_in_order_and_an_unreachable_api_does_not_raise(
    settled: SettledClient, refund_kind: ActionKind
) -> None:
    conversation = new_id("conv")
    channel = SettledChannel(settled, conversation, [refund_kind])
    channel.opened()
    channel.interrupted()
    channel.closed("dropped")
    channel.closed("hangup")  # the first close is the one that counts
    await channel.aclose()
    handoff = await settled.handoff(conversation)
    assert handoff.channels.voice == "closed" and handoff.channel_reasons["voice"] == "dropped"

    async with SettledClient("http://127.0.0.1:9", retries=0) as nowhere:
        lost = SettledChannel(nowhere, conversation, [refund_kind])
        lost.opened()
        await lost.aclose()  # logged, not raised: the voice loop goes on
        assert "Do not say it is done" in await lost.answer_request("refund", refund())


async def test_a_reversal_under_way_is_not_final_and_is_followed_to_its_end(
    settled: SettledClient, truth: AsyncSandbox
) -> None:
    conversation = new_id("conv")
    booking = load_action_kinds(names=["room_booking"])[0]
    channel = SettledChannel(settled, conversation, [booking], wait_s=5, authorize_on_call=True)
    done = await channel.request("room_booking", {"room": "Ada", "day": new_id("day")})
    assert done.state is State.CONFIRMED
    hold = await truth.fault("bookings", "cancel", "hold", done.operation_id, apply=True)
    await settled.cancel(done.operation_id, by="caller")
    await truth.wait_in_flight_cancel(done.operation_id)
    reversing = await settled.get(done.operation_id)
    assert reversing.state is State.CONFIRMED and reversing.compensating
    assert tool_answer(reversing).startswith("It went through and is being reversed now; not final yet.")

    following = asyncio.create_task(settled.await_settled(done.operation_id, 20))
    await truth.release(hold)
    final = await following
    assert final.state is State.CANCELLED and final.compensated
