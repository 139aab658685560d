"""The harness itself: localstripe and Radicale answer as the other tests assume, and the fault proxy in
front of each drops, refuses and holds requests as asked. Raw HTTP, no settled."""

import httpx
import pytest

from tests.helpers import new_id, wait_for
from tests.services.servers import (
    CalendarRecords,
    LocalStripe,
    ProxyThread,
    Radicale,
    StripeRecords,
    event_ics,
)


def _refund(base: str, key: str, charge: str, amount: int, op: str, timeout: float = 5.0) -> httpx.Response:
    form = {"charge": charge, "amount": str(amount), "metadata[operation_id]": op}
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": op}
    return httpx.post(f"{base}/v1/refunds", data=form, headers=headers, timeout=timeout)


# -- localstripe ------------------------------------------------------------------------------------


def test_a_refund_is_in_the_charges_refund_list(
    localstripe: LocalStripe, stripe_records: StripeRecords
) -> None:
    charge, other = stripe_records.charge(), stripe_records.charge()
    op = new_id("re")
    answer = _refund(localstripe.url, localstripe.api_key, charge, 1200, op)
    assert answer.status_code == 200, answer.text
    made = answer.json()
    assert made["status"] == "succeeded" and made["metadata"] == {"operation_id": op}
    assert [r["id"] for r in stripe_records.refunds_for(charge, op)] == [made["id"]]
    assert stripe_records.refunds(other) == []
    assert stripe_records.refund(made["id"])["amount"] == 1200
    assert stripe_records.refund("re_missing") is None


def test_localstripe_ignores_idempotency_keys(
    localstripe: LocalStripe, stripe_records: StripeRecords
) -> None:
    """The same POST with the same Idempotency-Key twice makes two refunds (Stripe would make one)."""
    charge = stripe_records.charge()
    op = new_id("re")
    for _ in range(2):
        assert _refund(localstripe.url, localstripe.api_key, charge, 100, op).status_code == 200
    assert len(stripe_records.refunds_for(charge, op)) == 2


def test_localstripe_refusals(localstripe: LocalStripe, stripe_records: StripeRecords) -> None:
    charge = stripe_records.charge()
    wrong = _refund(localstripe.url, "rk_test_wrong", charge, 100, new_id("re"))
    assert wrong.status_code == 401
    assert wrong.json() == {"error": {"message": "Unauthorized", "type": "invalid_request_error"}}
    declined = _refund(
        localstripe.url, localstripe.api_key, stripe_records.declined_charge(), 100, new_id("re")
    )
    assert declined.status_code == 400
    assert declined.json()["error"]["message"] == "Cannot refund a failed payment."
    missing = _refund(localstripe.url, localstripe.api_key, "ch_missing", 100, new_id("re"))
    assert missing.status_code == 404
    # localstripe refunds more than was charged without a word (Stripe answers 400).
    assert _refund(localstripe.url, localstripe.api_key, charge, 10**6, new_id("re")).status_code == 200
    assert stripe_records.refunds(charge) != []


def test_the_proxy_loses_a_refunds_answer_after_it_is_made(
    localstripe: LocalStripe, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge()
    op = new_id("re")
    stripe_proxy.fault("drop_after_forward", method="POST", match=op)
    with pytest.raises(httpx.HTTPError):
        _refund(stripe_proxy.url, localstripe.api_key, charge, 300, op)
    assert len(stripe_records.refunds_for(charge, op)) == 1
    [exchange] = stripe_proxy.forwarded(op)
    assert exchange.outcome == "dropped" and exchange.upstream_status == 200


def test_the_proxy_answers_503_before_the_service(
    localstripe: LocalStripe, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge()
    op = new_id("re")
    stripe_proxy.fault("unavailable", method="POST", match=op)
    assert _refund(stripe_proxy.url, localstripe.api_key, charge, 300, op).status_code == 503
    assert stripe_records.refunds(charge) == []
    # The fault fired once; the next request goes through.
    assert _refund(stripe_proxy.url, localstripe.api_key, charge, 300, op).status_code == 200
    assert len(stripe_records.refunds_for(charge, op)) == 1


def test_the_proxy_holds_a_request_past_the_clients_timeout_then_forwards_it(
    localstripe: LocalStripe, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge()
    op = new_id("re")
    hold = stripe_proxy.fault("hold", method="POST", match=op)
    with pytest.raises(httpx.TimeoutException):
        _refund(stripe_proxy.url, localstripe.api_key, charge, 300, op, timeout=0.3)
    assert stripe_proxy.held(op) and stripe_records.refunds(charge) == []
    stripe_proxy.release(hold)
    wait_for(lambda: stripe_records.refunds_for(charge, op), 5.0, "the held refund to land")


# -- Radicale -----------------------------------------------------------------------------------------


def test_a_create_only_put_creates_once(calendar: CalendarRecords) -> None:
    uid = new_id("ev")
    name = f"{uid}.ics"
    assert calendar.event(name) is None
    assert calendar.put(name, event_ics(uid)).status_code == 201
    assert calendar.put(name, event_ics(uid)).status_code == 412
    assert f"UID:{uid}" in (calendar.event(name) or "")
    assert name in calendar.names()
    assert calendar.delete(name).status_code == 200
    assert calendar.delete(name).status_code == 404
    assert calendar.event(name) is None and name not in calendar.names()


def test_radicale_refuses_a_wrong_password(radicale: Radicale, caldav_proxy: ProxyThread) -> None:
    for base in (radicale.url, caldav_proxy.url):
        answer = httpx.get(f"{base}{radicale.calendar_path}", auth=(radicale.user, "wrong"), timeout=5)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Basic")


def test_the_proxy_loses_a_puts_answer_after_it_is_made(
    radicale: Radicale, caldav_proxy: ProxyThread, calendar: CalendarRecords
) -> None:
    uid = new_id("ev")
    name = f"{uid}.ics"
    caldav_proxy.fault("drop_after_forward", method="PUT", match=uid)
    with httpx.Client(base_url=caldav_proxy.url, auth=radicale.auth, timeout=5) as http:
        through = CalendarRecords(http, radicale.calendar_path)
        with pytest.raises(httpx.HTTPError):
            through.put(name, event_ics(uid))
        assert calendar.event(name) is not None
        assert through.put(name, event_ics(uid)).status_code == 412
    [dropped, repeated] = caldav_proxy.forwarded(uid, "PUT")
    assert (dropped.outcome, dropped.upstream_status) == ("dropped", 201)
    assert repeated.upstream_status == 412
