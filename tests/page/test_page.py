"""The text channel page in a real browser, against the real stack: after the call, the page shows
what the records say, live, and offers only the controls the contract allows.

Each test checks what the page says against the sandbox's records, not only against the API.
"""

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, status, wait_for, wait_state
from tests.page.conftest import CHROMIUM, Watched, drop_call, event, handoff, only_record

pytestmark = pytest.mark.usefixtures("browser")

if CHROMIUM.exists():  # without it the browser fixture skips every test here
    from playwright.sync_api import Page, expect

Snap = Callable[["Page", str], Path]
# A held write goes from sending to checking once the kind's timeout passes: both are in flight.
IN_FLIGHT = re.compile("^(Sending|Checking the result)$")


def banner(page: "Page") -> Any:
    return page.locator("#banner-title")


def open_with_a_held_booking(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str
) -> tuple[str, str, "Page", Any]:
    """An authorized booking whose write the sandbox holds, and the page showing it in flight:
    (operation id, the hold to release, the page, the action's card)."""
    op = new_id()
    hold = sandbox.fault("bookings", "create", "hold", op, apply=True)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op, authorized=True)
    sandbox.wait_held(op)
    page = web.open(conversation)
    card = web.card(op)
    expect(card.locator(".state")).to_have_text(IN_FLIGHT)
    return op, hold, page, card


def test_a_conversation_with_nothing_yet(web: Watched, conversation: str, snap: Snap) -> None:
    page = web.open(conversation)
    expect(banner(page)).to_have_text("Nothing yet")
    expect(page.locator("#empty")).to_be_visible()
    expect(page.locator("#call")).to_be_hidden()  # no call was ever open: nothing to end
    snap(page, "nothing-yet")


def test_cut_before_dispatch_waits_for_the_go_ahead_and_go_ahead_sends_it(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    drop_call(api, conversation)
    page = web.open(conversation)
    card = web.card(op)
    expect(banner(page)).to_have_text("Waiting for you")
    expect(card.locator(".card-title")).to_have_text("Reserve the meeting room")
    expect(card.locator(".param dt")).to_have_text(["Room", "Day"])
    expect(card.locator(".param dd")).to_have_text(["Ada", "Thursday"])
    expect(card.locator(".state")).to_have_text("Waiting for your go-ahead")
    expect(card.locator(".say")).to_have_text(
        "Nothing has been sent yet: I need your go-ahead to reserve the meeting room."
    )
    expect(card.locator(".changed time")).to_have_attribute("datetime", status(api, op)["history"][-1]["at"])
    expect(card.get_by_role("button", name="Check now")).to_be_hidden()  # nothing is in flight
    expect(page.locator("#call-text")).to_have_text(
        "The call dropped. Nothing was cancelled: your requests carry on here."
    )
    expect(page.get_by_role("button", name="End call")).to_be_hidden()  # the call is already over
    assert sandbox.records(op) == []
    snap(page, "waiting-for-go-ahead")

    card.get_by_role("button", name="Go ahead").click()
    expect(card.locator(".state")).to_have_text("Confirmed")
    record = only_record(sandbox, op)
    expect(card.locator(".ref")).to_have_text(f"Reference: {record['id']}")
    expect(card.locator(".say")).to_have_text(
        f"Room Ada is reserved for Thursday. Your confirmation is {record['id']}."
    )
    expect(banner(page)).to_have_text("Stopped")
    expect(card.get_by_role("button", name="Go ahead")).to_be_hidden()
    # A confirmed booking can still be reversed (the kind compensates), so cancel stays offered.
    expect(card.get_by_role("button", name="Cancel this")).to_be_visible()
    assert (record["payload"]["room"], record["payload"]["day"]) == ("Ada", "Thursday")
    assert record["status"] != "cancelled"
    snap(page, "confirmed")

    # What the page showed is what the text channel presented; the handoff need not repeat it.
    confirmed = wait_for(lambda: (s := status(api, op))["presented"]["state"] == "confirmed" and s)
    assert confirmed["presented"]["channel"] == "text" and confirmed["presented"]["completed"] is True
    assert confirmed["presented"]["text"] == confirmed["say"]
    assert handoff(api, conversation)["say"] == ""
    texts = web.presented(op)
    assert texts[0].startswith("Nothing has been sent yet") and texts[-1] == confirmed["say"]
    assert len(texts) == len(set(texts)), f"recorded more than once: {texts}"  # once per (state, say)

    # Opened again, the page shows the same record and records nothing new: it was presented.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(web.card(op).locator(".state")).to_have_text("Confirmed")
    assert web.presented(op) == texts


def test_cut_in_transit_applied_and_response_lost_shows_the_records_id(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str
) -> None:
    op = new_id()
    sandbox.fault("bookings", "create", "drop_after_apply", op)
    lookups_fail = sandbox.fault("bookings", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=op, authorized=True)
    wait_state(api, op, "unknown")
    drop_call(api, conversation)
    sandbox.release(lookups_fail)  # the booking service answers lookups again
    page = web.open(conversation)  # opening the text channel reconciles what may be in flight
    card = web.card(op)
    expect(card.locator(".state")).to_have_text("Confirmed")
    record = only_record(sandbox, op)
    expect(card.locator(".ref")).to_have_text(f"Reference: {record['id']}")
    expect(card.locator(".say")).to_have_text(
        f"Room Ada is reserved for Thursday. Your confirmation is {record['id']}."
    )
    expect(banner(page)).to_have_text("Stopped")


def test_cut_in_transit_with_an_inconclusive_lookup_says_it_is_checking(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op = new_id()
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    sandbox.fault("refunds", "lookup", "fail_before_apply", op, status=503, count=0)
    create(api, "refund_nodedup", REFUND, conversation_id=conversation, operation_id=op)
    wait_state(api, op, "unknown")
    drop_call(api, conversation)
    page = web.open(conversation)
    card = web.card(op)
    expect(banner(page)).to_have_text("Work is continuing")
    expect(card.locator(".state")).to_have_text("Checking the result")
    expect(card.locator(".say")).to_have_text(
        "The request to refund the order was sent, but I haven't confirmed the result. "
        "I'm checking it before trying again."
    )
    expect(card.get_by_role("button", name="Go ahead")).to_be_hidden()
    # Cancelling is offered, with what it can and cannot do for a refund that may have gone through.
    expect(card.locator(".hint")).to_have_text(
        "It may already have gone through. I'll check first; if it did, it can't be undone."
    )

    card.get_by_role("button", name="Check now").click()
    expect(card.locator(".note")).to_have_text(
        "Checked just now: still no answer I can rely on. I'll keep checking and update this page."
    )
    expect(card.locator(".state")).to_have_text("Checking the result")
    snap(page, "checking-the-result")
    assert len(sandbox.records(op)) == 1 and len(sandbox.writes(op)) == 1  # applied once, never re-sent
    assert status(api, op)["state"] == "unknown"


def test_cancel_in_flight_checks_first_then_shows_the_truthful_outcome(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op, hold, page, card = open_with_a_held_booking(web, api, sandbox, conversation)
    expect(card.locator(".hint")).to_have_text(
        "It may already have gone through. I'll check first, and reverse it if it did."
    )

    card.get_by_role("button", name="Cancel this").click()
    expect(card.locator(".say")).to_contain_text("may already have gone through")
    expect(card.locator(".say")).to_contain_text("before I can cancel it")
    expect(card.locator(".flag")).to_have_text("Cancel requested: checking first")
    expect(card.get_by_role("button", name="Cancel this")).to_be_hidden()  # a cancel is under way
    expect(banner(page)).to_have_text("Work is continuing")
    assert status(api, op)["cancel_requested"] is True
    snap(page, "cancel-in-flight")

    sandbox.release(hold)  # the write was applied after all: the cancel must reverse it
    expect(card.locator(".state")).to_have_text("Cancelled (reversed)")
    record = only_record(sandbox, op)
    assert record["status"] == "cancelled"
    expect(card.locator(".ref")).to_have_text(f"Reference: {record['id']}")
    expect(card.locator(".say")).to_have_text(
        "The request to reserve the meeting room had gone through and has now been reversed. "
        f"Your reference is {record['id']}."
    )
    expect(banner(page)).to_have_text("Stopped")
    expect(card.get_by_role("button", name="Cancel this")).to_be_hidden()
    snap(page, "cancelled-reversed")


def test_a_change_of_day_asks_for_the_go_ahead_again(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    page = web.open(conversation)
    card = web.card(op)
    expect(card.locator(".params")).to_contain_text("Thursday")
    amended = api.post(f"/v1/actions/{op}/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    assert amended.status_code == 200, amended.text
    expect(card.locator(".param dd")).to_have_text(["Ada", "Friday"])  # live, without a reload
    expect(card.locator(".state")).to_have_text("Waiting for your go-ahead")
    expect(card.locator(".say")).to_have_text(
        "Nothing has been sent yet: the details changed, so I need your go-ahead to reserve the "
        "meeting room now."
    )
    snap(page, "changed-needs-go-ahead")
    assert sandbox.records(op) == []

    card.get_by_role("button", name="Go ahead").click()
    expect(card.locator(".state")).to_have_text("Confirmed")
    record = only_record(sandbox, op)
    assert record["payload"]["day"] == "Friday"
    expect(card.locator(".say")).to_have_text(
        f"Room Ada is reserved for Friday. Your confirmation is {record['id']}."
    )


def test_end_call_ends_the_call_and_cancels_nothing(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    event(api, conversation, "channel_opened", "voice")
    waiting = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    sending = new_id()
    hold = sandbox.fault("bookings", "create", "hold", sending, apply=True)
    create(api, "room_booking", BOOKING, conversation_id=conversation, operation_id=sending, authorized=True)
    sandbox.wait_held(sending)
    page = web.open(conversation)
    expect(page.locator("#call-text")).to_have_text("You're on a call with us.")
    expect(page.locator("#call-hint")).to_contain_text("Ending the call doesn't cancel anything")

    page.get_by_role("button", name="End call").click()
    expect(page.locator("#call-text")).to_have_text(
        "You ended the call. Nothing was cancelled: your requests carry on here."
    )
    expect(page.get_by_role("button", name="End call")).to_be_hidden()
    expect(page.locator("#call-text")).to_be_focused()  # the control went; focus did not fall to the top
    expect(banner(page)).to_have_text("Work is continuing")
    state = handoff(api, conversation)
    assert state["channels"]["voice"] == "closed" and state["channel_reasons"]["voice"] == "ended_by_user"
    assert [a["cancel_requested"] for a in state["actions"]] == [False, False]
    expect(web.card(waiting).locator(".state")).to_have_text("Waiting for your go-ahead")
    expect(web.card(sending).locator(".state")).to_have_text(IN_FLIGHT)
    snap(page, "call-ended")

    sandbox.release(hold)
    expect(web.card(sending).locator(".state")).to_have_text("Confirmed")
    assert only_record(sandbox, sending)["status"] != "cancelled"  # the booking stands
    assert sandbox.records(waiting) == []  # and nothing was sent without the go-ahead


def test_a_rejected_request_did_not_go_through(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op = new_id()
    sandbox.fault("refunds", "create", "reject", op, status=422)
    create(api, "refund", REFUND, conversation_id=conversation, operation_id=op, authorized=True)
    final = wait_state(api, op, "failed")
    page = web.open(conversation)
    card = web.card(op)
    expect(card.locator(".state")).to_have_text("Didn't go through")
    expect(card.locator(".reason")).to_have_text(f"Reason: {final['reason']}")
    expect(card.locator(".say")).to_have_text(final["say"])
    expect(card.locator(".controls")).to_be_hidden()  # nothing to cancel, authorize or check
    expect(banner(page)).to_have_text("Stopped")
    assert sandbox.records(op) == []
    snap(page, "didnt-go-through")


def test_a_cancel_before_dispatch_cancels_it_there_and_then(
    web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str, snap: Snap
) -> None:
    op = create(api, "refund", REFUND, conversation_id=conversation).json()["operation_id"]
    page = web.open(conversation)
    card = web.card(op)
    expect(card.locator(".hint")).to_have_text(
        "Nothing has been sent yet, so cancelling stops it completely."
    )
    card.get_by_role("button", name="Cancel this").click()
    expect(card.locator(".state")).to_have_text("Cancelled")
    expect(card.locator(".say")).to_have_text("Cancelled: the request to refund the order was never applied.")
    expect(banner(page)).to_have_text("Stopped")
    assert status(api, op)["state"] == "cancelled" and sandbox.records(op) == []
    snap(page, "cancelled")


def test_the_page_recovers_after_a_lost_connection(
    web: Watched, api: httpx.Client, sandbox: Sandbox, stack: Any, conversation: str
) -> None:
    op, hold, page, card = open_with_a_held_booking(web, api, sandbox, conversation)
    page.evaluate("window.sameDocument = true")
    stack.children["api"].kill()  # the connection is lost, not closed politely
    try:
        expect(page.locator("#connection")).to_have_attribute("data-connection", "lost")
        expect(page.locator("#connection-text")).to_contain_text("may be out of date")
        sandbox.release(hold)  # the outcome arrives while the page cannot hear about it
        wait_for(lambda: sandbox.records(op), what="the booking to be applied")
    finally:
        stack.start_api()
    expect(page.locator("#connection")).to_have_attribute("data-connection", "live")
    expect(card.locator(".state")).to_have_text("Confirmed")  # the current state first, on reconnect
    expect(card.locator(".ref")).to_have_text(f"Reference: {only_record(sandbox, op)['id']}")
    assert page.evaluate("window.sameDocument") is True  # no reload
    # The killed API's own worker had these workflows cached: until Temporal hands their tasks and
    # queries to another worker (seconds), a read may answer 503 "repeat it", which the page does.
    web.errors[:] = [error for error in web.errors if "status of 503" not in error]


def test_keyboard_only(web: Watched, api: httpx.Client, sandbox: Sandbox, conversation: str) -> None:
    event(api, conversation, "channel_opened", "voice")
    op = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    page = web.open(conversation)
    card = web.card(op)
    expect(card.locator(".state")).to_have_text("Waiting for your go-ahead")

    order = []
    for _ in range(5):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.innerText.trim()"))
    # A sensible order: skip link, the call, then the action's controls, primary first.
    assert order == ["Skip to your requests", "End call", "Go ahead", "Cancel this", "What happened"]

    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    go = card.get_by_role("button", name="Go ahead")
    expect(go).to_be_focused()
    outline = go.evaluate("button => getComputedStyle(button).outlineStyle")
    assert outline != "none", "the focused control must show its focus"
    page.keyboard.press("Enter")
    expect(card.locator(".state")).to_have_text("Confirmed")
    # The control is gone with its job done; focus waits on the card's state, not the page's top.
    expect(card.locator(".state")).to_be_focused()
    assert only_record(sandbox, op)["payload"]["day"] == BOOKING["day"]
    # Every state has its words in the live region too.
    expect(page.locator("#announcer")).to_contain_text("Reserve the meeting room: Confirmed.")


def test_phone_width(
    open_browser: Callable[..., Watched], stack: Any, api: httpx.Client, conversation: str, snap: Snap
) -> None:
    web = open_browser(stack.api_url, viewport={"width": 360, "height": 780}, is_mobile=True, has_touch=True)
    event(api, conversation, "channel_opened", "voice")
    waiting = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]
    create(api, "refund", REFUND, conversation_id=conversation, authorized=True, wait=10)
    page = web.open(conversation)
    expect(page.locator("li.card")).to_have_count(2)
    expect(page.locator("li.card .state").nth(1)).to_have_text("Confirmed")
    assert page.evaluate("document.documentElement.scrollWidth") <= 360  # nothing runs off the side
    for name in ("Go ahead", "Cancel this"):
        box = web.card(waiting).get_by_role("button", name=name).bounding_box()
        assert box is not None and box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= 360
    snap(page, "phone")
