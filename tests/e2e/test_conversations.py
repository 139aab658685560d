"""The tabletop: the call ends before the work does, and the text channel continues truthfully.

Each test checks the sandbox's records apart from what the handoff says.
"""

import itertools
import json
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, states_seen, status, wait_for, wait_state


def event(api: httpx.Client, conversation: str, type_: str, channel: str, reason: str | None = None) -> dict:
    response = api.post(
        f"/v1/conversations/{conversation}/events", json={"type": type_, "channel": channel, "reason": reason}
    )
    assert response.status_code == 202, response.text
    return response.json()


def handoff(api: httpx.Client, conversation: str) -> dict[str, Any]:
    response = api.get(f"/v1/conversations/{conversation}/handoff")
    assert response.status_code == 200, response.text
    return response.json()


def drop_call_and_open_text(api: httpx.Client, conversation: str) -> None:
    event(api, conversation, "interrupted", "voice")
    event(api, conversation, "channel_closed", "voice", "dropped")
    event(api, conversation, "channel_opened", "text")


def test_a_conversation_with_nothing_yet_is_idle(api: httpx.Client) -> None:
    empty = handoff(api, new_id("conv"))
    assert empty["work"] == "idle" and empty["actions"] == [] and empty["say"] == ""
    assert empty["channels"] == {"voice": "unused", "text": "unused"}


def test_cut_before_dispatch_then_text_asks_to_go_ahead(api: httpx.Client, sandbox: Sandbox) -> None:
    conversation = new_id("conv")
    op = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    event(api, conversation, "channel_opened", "voice")
    drop_call_and_open_text(api, conversation)
    state = handoff(api, conversation)
    assert state["work"] == "waiting_for_user"
    assert state["channels"] == {"voice": "closed", "text": "open"}
    assert state["channel_reasons"]["voice"] == "dropped"
    assert "Nothing has been sent" in state["say"] and "go-ahead" in state["say"]
    assert [a["state"] for a in state["actions"]] == ["requested"]
    assert sandbox.records(op) == []  # closing the call cancelled nothing and sent nothing
    assert status(api, op)["cancel_requested"] is False


def test_cut_in_transit_applied_then_text_says_reserved_with_the_reference(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    sandbox.fault("bookings", "create", "drop_after_apply", op)
    lookups_fail = sandbox.fault("bookings", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op, authorized=True)
    wait_state(api, op, "unknown")
    assert lookups_fail
    event(api, conversation, "interrupted", "voice")
    event(api, conversation, "channel_closed", "voice", "dropped")
    sandbox.clear_faults()
    event(api, conversation, "channel_opened", "text")  # a reconciliation: the lookup can answer now
    wait_state(api, op, "confirmed")
    state = handoff(api, conversation)
    record = sandbox.records(op)
    assert len(record) == 1
    assert state["work"] == "stopped"
    assert state["say"] == f"Room Ada is reserved for Thursday. Your confirmation is {record[0]['id']}."


def test_cut_in_transit_with_an_inconclusive_lookup_says_sent_but_unconfirmed(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=op)
    wait_state(api, op, "unknown")
    drop_call_and_open_text(api, conversation)
    state = handoff(api, conversation)
    assert state["work"] == "continuing"
    assert "was sent, but I haven't confirmed the result" in state["say"] and "checking" in state["say"]
    assert state["actions"][0]["claim"] == "unknown"
    assert len(sandbox.records(op)) == 1 and len(sandbox.writes(op)) == 1  # applied once, never re-sent


@pytest.mark.parametrize("completed", [False, True])
def test_cut_after_confirmation_redelivers_only_what_was_not_finished(
    api: httpx.Client, sandbox: Sandbox, completed: bool
) -> None:
    conversation = new_id("conv")
    confirmed = create(
        api, "room_booking", BOOKING, conversation_id=conversation, authorized=True, wait=10
    ).json()
    assert confirmed["state"] == "confirmed"
    op = confirmed["operation_id"]
    spoken = confirmed["say"] if completed else confirmed["say"][:20]
    presented = api.post(
        f"/v1/actions/{op}/presented", json={"channel": "voice", "text": spoken, "completed": completed}
    ).json()
    assert presented["presented"]["completed"] is completed and presented["presented"]["state"] == "confirmed"
    drop_call_and_open_text(api, conversation)
    state = handoff(api, conversation)
    assert state["say"] == ("" if completed else confirmed["say"])
    assert state["work"] == "stopped"
    assert len(sandbox.records(op)) == 1


def test_normal_uninterrupted_call_and_an_explicit_cancel(api: httpx.Client, sandbox: Sandbox) -> None:
    conversation = new_id("conv")
    normal = create(api, "refund", REFUND, conversation_id=conversation, authorized=True, wait=10).json()
    assert normal["state"] == "confirmed"
    api.post(
        f"/v1/actions/{normal['operation_id']}/presented",
        json={"channel": "voice", "text": normal["say"], "completed": True},
    )
    booking = new_id()
    hold = sandbox.fault("bookings", "create", "hold", booking, apply=True)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=booking, authorized=True)
    sandbox.wait_held(booking)
    api.post(f"/v1/actions/{booking}/cancel", json={"by": "caller"})
    assert handoff(api, conversation)["work"] == "continuing"
    sandbox.release(hold)
    wait_state(api, booking, "cancelled")
    state = handoff(api, conversation)
    assert [a["state"] for a in state["actions"]] == ["confirmed", "cancelled"]
    assert state["work"] == "stopped"
    assert state["say"].startswith(
        "The request to reserve the meeting room had gone through and has now been reversed"
    )
    assert sandbox.records(booking)[0]["status"] == "cancelled"
    assert len(sandbox.records(normal["operation_id"])) == 1


def test_a_change_of_day_needs_fresh_authorization(api: httpx.Client, sandbox: Sandbox) -> None:
    conversation = new_id("conv")
    op = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    friday = {"room": "Ada", "day": "Friday"}
    amended = api.post(f"/v1/actions/{op}/amend", json={"params": friday}).json()
    assert amended["authorized"] is False
    drop_call_and_open_text(api, conversation)
    state = handoff(api, conversation)
    assert state["work"] == "waiting_for_user"
    assert "details changed" in state["say"]
    assert sandbox.records(op) == []
    confirmed = api.post(f"/v1/actions/{op}/authorize", json={"by": "text"}, params={"wait": 10}).json()
    assert confirmed["state"] == "confirmed" and "Friday" in confirmed["say"]
    assert [r["payload"]["day"] for r in sandbox.records(op)] == ["Friday"]


def test_a_burst_of_interruptions_is_one_lookup_per_action(api: httpx.Client, sandbox: Sandbox) -> None:
    conversation, first, second = new_id("conv"), new_id(), new_id()
    for op in (first, second):
        sandbox.fault("refunds", "create", "fail_before_apply", op, status=503)
        # The lookup the send's own call makes at once gets no answer either: nothing is concluded
        # and nothing is due before the next automatic lookup, ten minutes on.
        sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503)
        create(api, "refund_slow", REFUND, conversation_id=conversation, operation_id=op)
        wait_state(api, op, "unknown")
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda _: event(api, conversation, "interrupted", "voice"), range(6)))
    for op in (first, second):
        wait_state(api, op, "confirmed")  # "never applied", once the horizon passed: sent again
        # The send's own (503), one for the burst of six (its 404 came inside the commit horizon),
        # and one after it.
        statuses = [row["status"] for row in sandbox.requests(op, op="lookup")]
        assert statuses == [503, 404, 404], statuses
        assert len(sandbox.records(op)) == 1


def _stream(
    base_url: str, conversation: str, into: "queue.Queue[dict]", live: threading.Event, stop: threading.Event
) -> None:
    try:
        with (
            httpx.Client(base_url=base_url) as client,
            client.stream("GET", f"/v1/conversations/{conversation}/stream", timeout=30) as response,
        ):
            for line in response.iter_lines():
                if stop.is_set():
                    return
                if line.startswith(": live"):
                    live.set()
                if line.startswith("data:"):
                    into.put(json.loads(line[5:]))
    except httpx.HTTPError:
        if not stop.is_set():
            raise


@contextmanager
def _collect(api: httpx.Client, conversation: str) -> Iterator[tuple["queue.Queue[dict]", threading.Event]]:
    events: queue.Queue[dict] = queue.Queue()
    live, stop = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=_stream, args=(str(api.base_url), conversation, events, live, stop), daemon=True
    )
    thread.start()
    assert live.wait(10), "the stream did not go live"
    yield events, stop
    stop.set()


def test_the_stream_delivers_every_transition_in_order_and_the_state_on_reconnect(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    event(api, conversation, "channel_opened", "text")
    with _collect(api, conversation) as (events, _stop):
        sandbox.fault("bookings", "create", "fail_before_apply", op, status=503)
        create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op, authorized=True)
        final = wait_state(api, op, "confirmed")
        snapshots: list[dict[str, Any]] = []

        def reached_confirmed() -> bool:
            while not events.empty():
                snapshots.append(events.get())
            return bool(snapshots) and snapshots[-1]["state"] == "confirmed"

        wait_for(reached_confirmed, what="the stream to reach confirmed")
        # One event per durable change: one may carry several transitions, and its history lists
        # every one, so each event's history goes on from the one before.
        histories = [snapshot["history"] for snapshot in snapshots]
        for earlier, later in itertools.pairwise(histories):
            assert later[: len(earlier)] == earlier
        assert all(a != b for a, b in itertools.pairwise(snapshots)), "an event was sent twice"
        assert histories[-1] == final["history"]
        assert states_seen(final) == ["requested", "running", "unknown", "running", "confirmed"]
    with _collect(api, conversation) as (events, _stop):
        first = wait_for(lambda: events.get(timeout=10), what="the first event after reconnecting")
        assert first["operation_id"] == op and first["state"] == "confirmed"


def test_a_stream_opened_before_its_conversation_exists_follows_a_waiting_action_to_its_end(
    api: httpx.Client,
) -> None:
    conversation, op = new_id("conv"), new_id()
    with _collect(api, conversation) as (events, _stop):
        create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op)
        waiting = wait_for(lambda: events.get(timeout=10), what="the waiting action on the stream")
        assert (waiting["operation_id"], waiting["state"], waiting["authorized"]) == (op, "requested", False)
        authorized = api.post(f"/v1/actions/{op}/authorize", json={"by": "caller"}, params={"wait": 10})
        assert authorized.json()["state"] == "confirmed", authorized.text
        later = [wait_for(lambda: events.get(timeout=10), what="the next change on the stream")]
        while later[-1]["state"] != "confirmed":
            later.append(wait_for(lambda: events.get(timeout=10), what="the confirmation on the stream"))
    assert later[-1]["history"] == authorized.json()["history"]
    assert all(status["operation_id"] == op for status in later)


def test_params_are_redacted_once_the_retention_window_has_passed(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=op)
    confirmed = wait_state(api, op, "confirmed")
    assert confirmed["params"] == REFUND
    redacted = wait_for(
        lambda: (s := status(api, op))["params"]["order_id"] == "[redacted]" and s, what="redacted params"
    )
    assert set(redacted["params"].values()) == {"[redacted]"}
    assert redacted["state"] == "confirmed" and redacted["business_ref"] in redacted["say"]
    assert "[redacted]" not in handoff(api, conversation)["say"]
    repeat = create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=op)
    assert repeat.status_code == 200  # a retry of the original request still matches it
    assert len(sandbox.records(op)) == 1


def test_a_sentence_about_unknown_finished_after_confirmation_does_not_count_as_the_confirmation(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, op = new_id("conv"), new_id()
    sandbox.fault("bookings", "create", "drop_after_apply", op)
    lookups = sandbox.fault("bookings", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op, authorized=True)
    unknown = wait_state(api, op, "unknown")
    assert lookups
    sandbox.clear_faults()
    confirmed = wait_state(api, op, "confirmed")
    # The voice channel finishes the "checking" sentence only now, after the lookup confirmed it.
    for body in (
        {"channel": "voice", "text": unknown["say"], "completed": True},
        {"channel": "voice", "text": unknown["say"], "completed": True, "for_state": "unknown"},
    ):
        api.post(f"/v1/actions/{op}/presented", json=body)
        assert handoff(api, conversation)["say"] == confirmed["say"]
    api.post(
        f"/v1/actions/{op}/presented", json={"channel": "text", "text": confirmed["say"], "completed": True}
    )
    assert handoff(api, conversation)["say"] == ""


def _read_stream(
    api: httpx.Client, conversation: str, enough: Callable[[list[tuple[str, dict]]], bool], **headers: str
) -> list[tuple[str, dict]]:
    """(id, status) of each event until `enough` says so; the connection is then dropped."""
    events: list[tuple[str, dict]] = []
    url = f"{str(api.base_url).rstrip('/')}/v1/conversations/{conversation}/stream"
    with (
        httpx.Client(timeout=httpx.Timeout(10, read=20)) as client,
        client.stream("GET", url, headers=headers) as response,
    ):
        event_id = ""
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                events.append((event_id, json.loads(line[5:])))
                if enough(events):
                    return events
    raise AssertionError(f"the stream ended after {events}")


def test_a_reconnect_with_last_event_id_gets_what_it_missed_and_nothing_twice(
    api: httpx.Client, sandbox: Sandbox
) -> None:
    conversation, first, second = new_id("conv"), new_id(), new_id()
    create(
        api,
        "room_booking",
        BOOKING,
        conversation_id=conversation,
        operation_id=first,
        authorized=True,
        wait=10,
    )
    opening = _read_stream(api, conversation, lambda seen: len(seen) == 1)
    assert [(status["operation_id"], status["state"]) for _, status in opening] == [(first, "confirmed")]
    opened_at = opening[0][0]

    sandbox.fault("bookings", "create", "fail_before_apply", second, status=503)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=second, authorized=True)
    final = wait_state(api, second, "confirmed")

    def confirmed(seen: list[tuple[str, dict]]) -> bool:
        return seen[-1][1]["operation_id"] == second and seen[-1][1]["state"] == "confirmed"

    # Back from the opening's id: every change of the second action, and nothing of the first again.
    rest = _read_stream(api, conversation, confirmed, **{"Last-Event-ID": opened_at})
    assert {status["operation_id"] for _, status in rest} == {second}
    assert rest[-1][1]["history"] == final["history"]

    # A client that saw the second action's first change and then lost the line.
    def first_change(seen: list[tuple[str, dict]]) -> bool:
        return any(status["operation_id"] == second for _, status in seen)

    before = _read_stream(api, conversation, first_change, **{"Last-Event-ID": opened_at})
    after = _read_stream(api, conversation, confirmed, **{"Last-Event-ID": before[-1][0]})
    assert [status for _, status in before + after] == [status for _, status in rest], "each change once"
    positions = [tuple(int(n) for n in event_id[1:].split(".")) for event_id, _ in before + after]
    assert all(a < b for a, b in itertools.pairwise(positions)), "ids move forward"
    histories = [status["history"] for _, status in before + after]
    assert all(later[: len(earlier)] == earlier for earlier, later in itertools.pairwise(histories))
    assert states_seen(final) == ["requested", "running", "unknown", "running", "confirmed"]
