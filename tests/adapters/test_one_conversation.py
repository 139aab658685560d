"""The adapters' channel sees one conversation and survives any input, against the real stack: another
conversation's operation id, handed to `verify_action` or `authorize_action` or met by a request, gets
a truthful tool text with nothing of that action, and the action is left as it was; tool arguments of
any shape and text (lone surrogates included, generated) get a tool text, never an exception, and a
refused call records nothing."""

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from settled.adapters.common import (
    AUTHORIZE_TOOL,
    CHECK_TOOL,
    ActionKind,
    SettledChannel,
    derived_operation_id,
)

from settled.client import SettledAPIError, SettledClient
from settled.domain.canonical import not_text
from settled.domain.models import ActionStatus
from settled.runtime.stack import Stack
from tests.any_input import ANY_OBJECT, refund_shaped
from tests.client.support import AsyncSandbox, new_id, refund

# Enough to meet every shape of argument, few enough to stay a few seconds.
EXAMPLES = 15
ARGUMENTS = ANY_OBJECT | refund_shaped()


async def _status(settled: SettledClient, operation_id: str) -> ActionStatus:
    return await settled.get(operation_id)


async def test_another_conversations_action_is_neither_read_nor_authorized(
    settled: SettledClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    theirs = await settled.create_action(new_id("conv-b"), "refund", refund())  # waits for its go-ahead
    before = await _status(settled, theirs.operation_id)
    mine = SettledChannel(settled, new_id("conv-a"), [refund_kind], wait_s=2)
    op = theirs.operation_id
    checked = await mine.answer_tool(CHECK_TOOL, {"operation_id": op})
    authorized = await mine.answer_tool(AUTHORIZE_TOOL, {"operation_id": op})
    assert checked == f"There is no request {op} in this conversation."
    assert authorized == f"There is no request {op} in this conversation. Nothing was authorized."
    assert await _status(settled, op) == before  # not authorized, not reconciled
    assert await truth.writes(op) == []


async def test_a_request_that_meets_another_conversations_id_is_not_taken_for_it(
    settled: SettledClient, truth: AsyncSandbox, refund_kind: ActionKind
) -> None:
    """An id rule that names another conversation's action: the 409 is a refusal, never that action."""
    theirs = await settled.create_action(new_id("conv-b"), "refund", refund(), authorized=True, wait=10)
    assert theirs.state.value == "confirmed"

    def same_id(*_: Any) -> str:
        return theirs.operation_id

    mine = SettledChannel(
        settled, new_id("conv-a"), [refund_kind], authorize_on_call=True, operation_ids=same_id
    )
    answer = await mine.answer_tool("refund", refund())
    assert answer.startswith("Not recorded") and "operation_conflict" in answer, answer
    for held in (theirs.say, theirs.business_ref or "-", theirs.conversation_id, "CONFIRMED"):
        assert held not in answer
    assert mine.operations == [] and len(await truth.writes(theirs.operation_id)) == 1
    try:
        await mine.request("refund", refund())
    except SettledAPIError as error:
        assert (error.code, error.status) == ("operation_conflict", 409)
    else:
        raise AssertionError("a conflict was taken for an action")


def test_no_tool_arguments_make_the_channel_fail(stack: Stack, refund_kind: ActionKind) -> None:
    """A sync test: each example runs its channel on a loop of its own."""

    async def ask(conversation: str, args: dict[str, Any]) -> tuple[str, int, int]:
        async with SettledClient(stack.api_url, timeout_s=20) as client:
            channel = SettledChannel(client, conversation, [refund_kind], wait_s=0, authorize_on_call=True)
            answer = await channel.answer_tool("refund", args)
            handoff = await client.handoff(conversation)
            op = derived_operation_id(conversation, "refund", args)
            truth = AsyncSandbox(stack.sandbox_url)
            try:
                return answer, len(handoff.actions), len(await truth.writes(op))
            finally:
                await truth.aclose()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(args=ARGUMENTS)
    def one(args: dict[str, Any]) -> None:
        answer, actions, writes = asyncio.run(ask(new_id("conv"), args))
        if not_text(args) is not None:
            assert answer.startswith("Not recorded") and "not valid Unicode text" in answer, answer
        if answer.startswith("Not recorded"):
            assert (actions, writes) == (0, 0), answer

    one()
