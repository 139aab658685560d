"""Same request, same action, in the core every adapter and edge shares (`SettledChannel.request`): a
model that asks again writing its arguments otherwise (`5.0` for `5`, `5e0`, keys in another order, a
nested object, a list, the same text in another Unicode form) meets the one action, and the service that
does not deduplicate is written once. Values that differ stay two actions. Arguments arrive as JSON text,
as every framework hands them over."""

import json
import unicodedata

import pytest
from settled.adapters.common import (
    ActionKind,
    SettledChannel,
    derived_operation_id,
    earlier_operation_id,
    load_action_kinds,
)

from settled.client import SettledClient
from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox, new_id

KIND = "refund_nodedup"  # a second send would be a second refund


@pytest.fixture(scope="module")
def unkeyed_refund(stack: Stack) -> ActionKind:
    return load_action_kinds(stack.config, names=[KIND])[0]


def args(text: str, order: str) -> dict:
    return json.loads(text.replace("ORDER", order))


NFC, NFD = unicodedata.normalize("NFC", "Zürich"), unicodedata.normalize("NFD", "Zürich")
ASKED_AGAIN = {
    "float": (
        '{"order_id": "ORDER", "amount": 5, "currency": "EUR"}',
        ['{"order_id": "ORDER", "amount": 5.0, "currency": "EUR"}'],
    ),
    "exponent": (
        '{"order_id": "ORDER", "amount": 700, "currency": "EUR"}',
        ['{"order_id": "ORDER", "amount": 7e2, "currency": "EUR"}'],
    ),
    "key-order": (
        '{"order_id": "ORDER", "amount": 5, "currency": "EUR"}',
        ['{"currency": "EUR", "amount": 5, "order_id": "ORDER"}'],
    ),
    "nested": (
        '{"order_id": "ORDER", "amount": 5, "currency": "EUR", "why": {"code": 2, "by": {"who": "ai"}}}',
        ['{"why": {"by": {"who": "ai"}, "code": 2.0},"currency": "EUR", "amount": 5e0, "order_id":"ORDER"}'],
    ),
    "list": (
        '{"order_id": "ORDER", "amount": 5, "currency": "EUR", "items": ["a", 1]}',
        ['{"order_id": "ORDER", "amount": 5.0, "currency": "EUR", "items": ["a", 1.0]}'],
    ),
    "unicode": (
        json.dumps({"order_id": "ORDER", "amount": 5, "currency": "EUR", "city": NFC}),
        [json.dumps({"order_id": "ORDER", "amount": 5, "currency": "EUR", "city": NFD}, ensure_ascii=False)],
    ),
}


@pytest.mark.parametrize("case", list(ASKED_AGAIN))
async def test_asked_again_written_otherwise_meets_one_action_and_one_write(
    settled: SettledClient, truth: AsyncSandbox, unkeyed_refund: ActionKind, case: str
) -> None:
    first, again = ASKED_AGAIN[case]
    conversation, order = new_id("conv"), new_id("order")
    channel = SettledChannel(settled, conversation, [unkeyed_refund], wait_s=5)
    done = await channel.request(KIND, args(first, order))
    assert done.state is State.CONFIRMED
    for text in again:
        repeated = await channel.request(KIND, args(text, order))
        assert repeated.operation_id == done.operation_id and repeated.attempts == 1
    assert len(await truth.refunds_for(order)) == 1
    assert channel.operations == [done.operation_id]


@pytest.mark.parametrize(
    ("first", "other"),
    [
        (
            '{"order_id": "ORDER", "amount": 5, "currency": "EUR"}',
            '{"order_id": "ORDER", "amount": 5.1, "currency": "EUR"}',
        ),
        (
            '{"order_id": "ORDER", "amount": 5, "currency": "EUR", "note": 5}',
            '{"order_id": "ORDER", "amount": 5, "currency": "EUR", "note": "5"}',
        ),
    ],
    ids=["5-and-5.1", "number-and-text"],
)
async def test_values_that_differ_are_two_requests(
    settled: SettledClient, truth: AsyncSandbox, unkeyed_refund: ActionKind, first: str, other: str
) -> None:
    conversation, order = new_id("conv"), new_id("order")
    channel = SettledChannel(settled, conversation, [unkeyed_refund], wait_s=5)
    one = await channel.request(KIND, args(first, order))
    two = await channel.request(KIND, args(other, order))
    assert one.operation_id != two.operation_id
    assert {one.state, two.state} == {State.CONFIRMED}
    assert len(await truth.refunds_for(order)) == 2


async def test_an_action_created_before_the_upgrade_is_met_by_the_same_request_after_it(
    settled: SettledClient, truth: AsyncSandbox, unkeyed_refund: ActionKind
) -> None:
    """Before params were compared as values, `5.0` was written as it came: an action created then
    under that id must be met by the same request asked again now, not sent a second time."""
    conversation, order = new_id("conv"), new_id("order")
    params = {"order_id": order, "amount": 5.0, "currency": "EUR"}
    before = earlier_operation_id(conversation, KIND, params)
    assert before != derived_operation_id(conversation, KIND, params)  # the two derivations differ here
    # What an adapter of the earlier release did: create under the earlier id.
    created = await settled.create_action(conversation, KIND, params, operation_id=before, wait=5)
    assert created.state is State.CONFIRMED

    channel = SettledChannel(settled, conversation, [unkeyed_refund], wait_s=5)
    again = await channel.request(KIND, json.loads(json.dumps(params)))
    assert again.operation_id == before and again.attempts == 1
    assert len(await truth.refunds_for(order)) == 1
