"""Twilio ConversationRelay over a real WebSocket: an app serves it with `SettledConversationRelay` and a
scripted model, and the test plays Twilio with the documented message sequence (`setup`, `prompt`,
`interrupt`, the socket's end), each case judged by the sandbox's records and settled's own."""

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from settled.adapters.common import ActionKind
from settled.adapters.conversation_relay import SettledConversationRelay
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from settled.domain.states import State
from tests.adapters.conftest import SentClient
from tests.adapters.heard import CUT_BY_THE_HANG_UP, Caller, Sent, heard_in_full, owed, recorded_heard, sent
from tests.client.support import AsyncSandbox, eventually

TOLD = "Tell the caller: "


async def app(
    websocket: ServerConnection, caller: Caller, relays: list[SettledConversationRelay], ended: asyncio.Event
) -> None:
    """The app: its scripted model asks for the refund when the caller does, and says what it is told."""
    relay = SettledConversationRelay(
        caller.settled, [caller.kind], websocket.send, wait_s=caller.wait_s, authorize_on_call=True
    )
    relays.append(relay)
    try:
        async for frame in websocket:
            message = await relay.receive(frame)
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
    """The app's next `turns` turns, as Twilio would speak them."""
    said: list[str] = []
    while len(said) < turns:
        message = json.loads(await asyncio.wait_for(websocket.recv(), 30))
        assert message["type"] == "text" and message["last"] is True
        said.append(message["token"])
    return said


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
        _, confirmation = await spoken(websocket, 2)
        await websocket.send(prompt("Thanks, bye."))
        await eventually(lambda: recorded_heard(caller), what="the confirmation heard")
    await heard_in_full(caller, said_last=confirmation)


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
