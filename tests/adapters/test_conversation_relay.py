"""Twilio ConversationRelay over a real WebSocket: an app serves it with `SettledConversationRelay` and a
scripted model, and the test plays Twilio with the documented message sequence (`setup`, `prompt`,
`interrupt`, the socket's end), each case judged by the sandbox's records and settled's own: the
action's `presented` and the handoff's `say`. The app's loop is the guide's (docs/conversation-relay.md):
it takes the next message only once its model has answered, so the caller's words said while the
refund runs reach the app after the confirmation was sent (the adapter noted them on arrival)."""

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from settled.adapters.common import ActionKind
from settled.adapters.conversation_relay import SettledConversationRelay
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from settled.domain.states import State
from tests.adapters.conftest import SentClient
from tests.adapters.heard import (
    CUT_BY_THE_HANG_UP,
    HEARD_AFTER_A_BARGE_IN,
    Caller,
    Sent,
    heard_in_full,
    owed,
    recorded_heard,
    sent,
)
from tests.client.support import AsyncSandbox, eventually

TOLD = "Tell the caller: "
# How fast Twilio's voice speaks in these calls, and the fastest the adapter is told a voice speaks.
TWILIO_MS_PER_CHAR = 15.0
FASTEST_MS_PER_CHAR = 10.0


async def app(
    websocket: ServerConnection, caller: Caller, relays: list[SettledConversationRelay], ended: asyncio.Event
) -> None:
    """The app: its scripted model asks for the refund when the caller does, and says what it is told."""
    relay = SettledConversationRelay(
        caller.settled,
        [caller.kind],
        websocket.send,
        wait_s=caller.wait_s,
        authorize_on_call=True,
        fastest_ms_per_char=FASTEST_MS_PER_CHAR,
    )
    relays.append(relay)
    try:
        async for message in relay.messages(websocket):
            if message["type"] == "prompt" and "refund" in message["voicePrompt"].lower():
                await relay.say("One moment.")
                answer = await relay.answer_tool("refund", caller.params)
                await relay.say(answer.partition(TOLD)[2])
    finally:
        await relay.closed(websocket.close_code)
        ended.set()


@asynccontextmanager
async def twilio(caller: Caller) -> AsyncIterator[tuple[ClientConnection, list[SettledConversationRelay]]]:
    """Twilio's side of one call: connected to the app over a WebSocket of its own, set up."""
    relays: list[SettledConversationRelay] = []
    ended = asyncio.Event()

    async def handler(websocket: ServerConnection) -> None:
        await app(websocket, caller, relays, ended)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}") as websocket:
            await websocket.send(json.dumps(setup(caller.conversation.removeprefix("twilio:"))))
            yield websocket, relays
        await asyncio.wait_for(ended.wait(), 20)  # the app has sent all it had to send


def setup(call_sid: str) -> dict[str, Any]:
    """ConversationRelay's first message, as its documentation shows it."""
    return {
        "type": "setup",
        "sessionId": "VX00000000000000000000000000000000",
        "callSid": call_sid,
        "parentCallSid": "",
        "from": "+12223334444",
        "to": "+13334445555",
        "forwardedFrom": "+13334445555",
        "callerName": "",
        "direction": "inbound",
        "callType": "PSTN",
        "callStatus": "RINGING",
        "accountSid": "AC00000000000000000000000000000000",
        "applicationSid": None,
        "customParameters": {},
    }


def prompt(words: str) -> str:
    return json.dumps({"type": "prompt", "voicePrompt": words, "lang": "en-US", "last": True})


def interrupt(played: str) -> str:
    return json.dumps(
        {
            "type": "interrupt",
            "utteranceUntilInterrupt": played,
            "durationUntilInterruptMs": 100 * len(played),
        }
    )


async def spoken(websocket: ClientConnection, turns: int) -> list[str]:
    """The app's next `turns` turns, as Twilio receives them to speak."""
    said: list[str] = []
    while len(said) < turns:
        message = json.loads(await asyncio.wait_for(websocket.recv(), 30))
        assert message["type"] == "text" and message["last"] is True
        said.append(message["token"])
    return said


async def played(text: str) -> None:
    """Twilio speaking `text` to the caller, at its voice's pace (the call's real time)."""
    await asyncio.sleep(len(text) * TWILIO_MS_PER_CHAR / 1000)


def cut_by_the_interrupt(presented: str) -> Sent:
    """What the adapter sends for a call whose confirmation an `interrupt` ended: its presentation
    first (judged by what had been spoken), then the interruption, then the hang-up."""
    return [
        ("channel_opened", None),
        ("presented", presented),
        ("interrupted", None),
        ("channel_closed", "hangup"),
    ]


def calling(settled: SentClient, refund_kind: ActionKind, **options: Any) -> Caller:
    caller = Caller(settled, refund_kind, **options)
    return Caller(settled, refund_kind, conversation=f"twilio:{caller.conversation}", **options)


async def test_an_interruption_mid_confirmation_cuts_it_and_it_stays_owed(
    settled: SentClient, refund_kind: ActionKind, truth: AsyncSandbox
) -> None:
    caller = calling(settled, refund_kind)
    async with twilio(caller) as (websocket, _):
        await websocket.send(prompt(caller.asks))
        _, confirmation = await spoken(websocket, 2)
        # The caller cuts in half-way through the confirmation's sentence.
        await websocket.send(interrupt(confirmation[: len(confirmation) // 2]))
        await eventually(lambda: sent(settled, ("interrupted", None)), what="the interruption sent")
    await owed(
        caller,
        verbatim=False,
        sent=cut_by_the_interrupt("cut"),
    )
    assert len(await truth.refunds_for(caller.params["order_id"])) == 1


async def test_a_confirmation_spoken_in_full_before_the_cut_is_heard(
    settled: SentClient, refund_kind: ActionKind
) -> None:
    caller = calling(settled, refund_kind)
    async with twilio(caller) as (websocket, _):
        await websocket.send(prompt(caller.asks))
        _, confirmation = await spoken(websocket, 2)
        await websocket.send(interrupt(confirmation))  # cut after its last word
        await eventually(lambda: recorded_heard(caller), what="the confirmation heard")
    await heard_in_full(
        caller,
        said_last=confirmation,
        sent=cut_by_the_interrupt("heard"),
    )


async def test_the_callers_next_words_say_the_confirmation_was_heard(
    settled: SentClient, refund_kind: ActionKind
) -> None:
    caller = calling(settled, refund_kind)
    async with twilio(caller) as (websocket, _):
        await websocket.send(prompt(caller.asks))
        holding, confirmation = await spoken(websocket, 2)
        await played(holding + confirmation)  # the caller listens to the end, then speaks
        await websocket.send(prompt("Thanks, bye."))
        await eventually(lambda: recorded_heard(caller), what="the confirmation heard")
    await heard_in_full(caller, said_last=confirmation)


async def refund_held_while_the_caller_speaks(
    caller: Caller, truth: AsyncSandbox, websocket: ClientConnection, *said: str
) -> str:
    """The caller asks for the refund and, while it is held at the service (the app waiting on its
    tool call, taking no message), says `said`; then the service answers. The confirmation, as sent."""
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    await websocket.send(prompt(caller.asks))
    await spoken(websocket, 1)  # "One moment."
    await truth.wait_in_flight(caller.op)
    for frame in said:
        await websocket.send(frame)
    await truth.release(hold)
    (confirmation,) = await spoken(websocket, 1)
    return confirmation


@pytest.mark.parametrize("run", range(3))
@pytest.mark.parametrize("then", ["cut", "hang-up"])
async def test_words_said_before_the_confirmation_existed_never_make_it_heard(
    settled: SentClient, refund_kind: ActionKind, truth: AsyncSandbox, then: str, run: int
) -> None:
    """The caller says "Okay." while the refund runs; the app reads it only after it sent the
    confirmation, which the caller then cuts half-way or hangs up on: recorded cut, and owed."""
    caller = calling(settled, refund_kind, wait_s=15)
    async with twilio(caller) as (websocket, _):
        confirmation = await refund_held_while_the_caller_speaks(caller, truth, websocket, prompt("Okay."))
        if then == "cut":
            await websocket.send(interrupt(confirmation[: len(confirmation) // 2]))
            await eventually(lambda: sent(settled, ("interrupted", None)), what="the interruption sent")
    expected = cut_by_the_interrupt("cut") if then == "cut" else CUT_BY_THE_HANG_UP
    await owed(caller, verbatim=False, sent=expected)


@pytest.mark.parametrize("run", range(3))
async def test_words_that_cross_the_confirmation_never_make_it_heard(
    settled: SentClient, refund_kind: ActionKind, run: int
) -> None:
    """The caller's words arrive right after the confirmation was sent, sooner than it can have been
    spoken (said as it began, or before): they prove nothing, and the hang-up that follows cuts it."""
    caller = calling(settled, refund_kind)
    async with twilio(caller) as (websocket, _):
        await websocket.send(prompt(caller.asks))
        await spoken(websocket, 2)
        await websocket.send(prompt("Okay."))
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


@pytest.mark.parametrize("run", range(3))
async def test_a_cut_before_the_confirmation_existed_does_not_cut_it(
    settled: SentClient, refund_kind: ActionKind, truth: AsyncSandbox, run: int
) -> None:
    """The caller cuts the holding line while the refund runs (the app reads it late); the
    confirmation sent after it is heard to its end by the caller's next words."""
    caller = calling(settled, refund_kind, wait_s=15)
    async with twilio(caller) as (websocket, _):
        confirmation = await refund_held_while_the_caller_speaks(
            caller, truth, websocket, interrupt("One mo"), prompt("Hello?")
        )
        await played(confirmation)
        await websocket.send(prompt("Thanks, bye."))
        await eventually(lambda: recorded_heard(caller), what="the confirmation heard")
    await heard_in_full(caller, said_last=confirmation, sent=HEARD_AFTER_A_BARGE_IN)


async def test_a_hang_up_mid_confirmation_leaves_it_owed(
    settled: SentClient, refund_kind: ActionKind
) -> None:
    caller = calling(settled, refund_kind)
    async with twilio(caller) as (websocket, _):
        await websocket.send(prompt(caller.asks))
        await spoken(websocket, 2)
    await owed(caller, sent=CUT_BY_THE_HANG_UP)


async def test_stop_while_the_refund_is_in_flight_cancels_nothing_and_refunds_once(
    settled: SentClient, refund_kind: ActionKind, truth: AsyncSandbox
) -> None:
    caller = calling(settled, refund_kind, wait_s=1)
    hold = await truth.fault("refunds", "create", "hold", caller.op, apply=True)
    async with twilio(caller) as (websocket, relays):
        await websocket.send(prompt(caller.asks))
        _, holding = await spoken(websocket, 2)
        assert "done" not in holding.lower() and "refunded" not in holding.lower(), holding
        await websocket.send(interrupt(holding[:10]))
        await websocket.send(prompt("Stop, stop."))
        await eventually(lambda: sent(settled, ("interrupted", None)), what="the interruption sent")
        await truth.release(hold)
        # Asked again, the verified outcome: the refund went through, once.
        answer = await relays[0].answer_tool("verify_action", {"operation_id": caller.op})
        action = await settled.get(caller.op)
        assert action.state is State.CONFIRMED or "CONFIRMED" not in answer
    await eventually(lambda: _confirmed(caller), timeout_s=30, what="the refund confirmed")
    records = await truth.refunds_for(caller.params["order_id"])  # the service's own: one refund
    assert len(records) == 1 and records[0]["key"] == caller.op


async def _confirmed(caller: Caller) -> bool:
    return (await caller.settled.get(caller.op)).state is State.CONFIRMED
