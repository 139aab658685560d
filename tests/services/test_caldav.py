"""The room booking kind of examples/kinds/calendar.toml (a create-only PUT of an event, a DELETE to
reverse it) against Radicale behind a fault proxy, through a real settled stack. Every verdict is read
from the calendar itself: which events it holds, and what the proxy saw reach it."""

import httpx
import pytest

from tests.helpers import create, new_id, states_seen, wait_state
from tests.services.servers import CalendarRecords, ProxyThread, event_ics

SETTLE_S = 30.0
BOOKING = {"room": "Ada", "day": "20261210"}


def book(api: httpx.Client, kind: str = "room_booking", **extra: object) -> str:
    op = new_id("booking")
    answer = create(api, kind, BOOKING, operation_id=op, authorized=True, **extra)
    assert answer.status_code == 201, answer.text
    return op


def events(calendar: CalendarRecords, op: str) -> list[str]:
    """The calendar's events for the operation (named by its key, or carrying it as UID)."""
    return calendar.events_with(op)


def test_a_booking_is_one_event_in_the_calendar(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    op = book(services_api, wait=10)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    assert events(calendar, op) == [f"{op}.ics"] and done["claim"] == "done"
    text = calendar.event(f"{op}.ics") or ""
    assert f"UID:{op}" in text and "SUMMARY:Room Ada" in text and "DTSTART;VALUE=DATE:20261210" in text
    [put] = caldav_proxy.forwarded(op, "PUT")
    assert put.upstream_status == 201 and put.headers.get("if-none-match") == "*"


@pytest.mark.parametrize("mode", ["drop_after_forward", "unavailable"])
def test_a_booking_whose_answer_or_request_is_lost_is_one_event(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords, mode: str
) -> None:
    """The answer lost after the server made the event, or the request lost before it (503): either
    way `unknown`, then one event. Whether settled re-sent the PUT (it may: the kind is idempotent) or
    looked it up, the calendar made the event once: a re-sent PUT is answered 412."""
    op = new_id("booking")
    caldav_proxy.fault(mode, method="PUT", match=op)
    create(services_api, "room_booking", BOOKING, operation_id=op, authorized=True)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    assert "unknown" in states_seen(done)
    assert events(calendar, op) == [f"{op}.ics"]
    statuses = [e.upstream_status for e in caldav_proxy.forwarded(op, "PUT")]
    assert statuses[0] == 201 and all(s == 412 for s in statuses[1:]), statuses


def test_a_re_sent_booking_answered_412_is_confirmed_and_one_event(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    """The event is there before settled's PUT arrives (an earlier send that landed): the create-only
    PUT is answered 412, which the kind maps to applied. Nothing is overwritten."""
    op = new_id("booking")
    assert calendar.put(f"{op}.ics", event_ics(op, summary="landed earlier")).status_code == 201
    create(services_api, "room_booking", BOOKING, operation_id=op, authorized=True, wait=10)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    assert done["claim"] == "done"
    assert [e.upstream_status for e in caldav_proxy.forwarded(op, "PUT")] == [412]
    assert events(calendar, op) == [f"{op}.ics"]
    assert "SUMMARY:landed earlier" in (calendar.event(f"{op}.ics") or "")


def test_a_cancelled_booking_is_deleted(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    op = book(services_api, wait=10)
    wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    assert events(calendar, op) == [f"{op}.ics"]
    services_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 10})
    final = wait_state(services_api, op, "cancelled", timeout_s=SETTLE_S)
    assert final["compensated"] and final["claim"] == "not_done"
    assert events(calendar, op) == []
    assert [e.upstream_status for e in caldav_proxy.forwarded(op, "DELETE")] == [200]


def test_a_deletion_whose_answer_is_lost_deletes_once(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    op = book(services_api, wait=10)
    wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    caldav_proxy.fault("drop_after_forward", method="DELETE", match=op)
    services_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"})
    final = wait_state(services_api, op, "cancelled", timeout_s=SETTLE_S)
    assert final["compensated"]
    assert events(calendar, op) == []
    # One DELETE took the event away; any later one (a DELETE of the record itself may be re-sent)
    # found it gone.
    statuses = [e.upstream_status for e in caldav_proxy.forwarded(op, "DELETE")]
    assert statuses.count(200) == 1 and statuses[0] == 200, statuses
    assert all(s == 404 for s in statuses[1:]), statuses


def test_a_wrong_password_fails_saying_the_server_refused_our_credentials(
    services_api: httpx.Client, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    op = book(services_api, kind="room_booking_wrong_password", wait=10)
    failed = wait_state(services_api, op, "failed", timeout_s=SETTLE_S)
    assert "refused our credentials" in (failed["reason"] or ""), failed["reason"]
    assert "401: Access to the requested resource forbidden" in failed["reason"]  # the server's own words
    assert events(calendar, op) == []
    assert [e.upstream_status for e in caldav_proxy.forwarded(op, "PUT")] == [401]
