# ruff: noqa: E501 -- the kinds files are written as a team writes them: one request a line
"""Answer mapping and request shapes on their own: what a service's answer means, what is sent."""

import base64
import json
from typing import Any
from urllib.parse import parse_qsl

import pytest

from settled.business.answers import (
    classify_compensation,
    classify_dispatch,
    classify_dispatch_transport,
    classify_lookup,
)
from settled.business.shapes import Values, build
from settled.domain.kinds import KindSpec, parse_kinds

REFUND = """
[kinds.refund]
description = "refund the payment"
params_schema = { type = "object", required = ["charge", "amount"], properties = { charge = { type = "string" }, amount = { type = "integer", minimum = 1 }, note = { type = "object" } } }
auth = { type = "bearer", token = "{secret.STRIPE_API_KEY}" }
headers = { "Stripe-Version" = "2024-06-20" }
dispatch = { method = "POST", url = "https://payments.example/v1/refunds", body = "form", fields = { charge = "{params.charge}", amount = "{params.amount}", "metadata[operation_id]" = "{operation_id}" } }
lookup = { method = "GET", url = "https://payments.example/v1/refunds?charge={params.charge}&limit=100", authoritative = true, found = "data[?metadata.operation_id == {operation_id}] | [0]" }
reference_field = "id"
confirmed_when = "status == 'succeeded'"
failed_when = "status == 'failed' || status == 'canceled'"
idempotency_header = "Idempotency-Key"
idempotency_window_s = 86400.0
"""

BOOKING = """
[kinds.room_booking]
description = "book the room"
params_schema = { type = "object", required = ["room"], properties = { room = { type = "string" } } }
auth = { type = "basic", username = "agent", password = "{secret.CALDAV_PASSWORD}" }
idempotent = true
dispatch = { method = "PUT", url = "https://dav.example/rooms/{operation_id}.ics", headers = { "If-None-Match" = "*" }, body = "text", content_type = "text/calendar", template = "BEGIN:VCALENDAR\\r\\nUID:{operation_id}\\r\\nSUMMARY:{params.room} {{x}}\\r\\nEND:VCALENDAR\\r\\n", statuses = { 412 = "applied" } }
lookup = { method = "GET", url = "https://dav.example/rooms/{operation_id}.ics", authoritative = true }
compensate = { method = "DELETE", url = "https://dav.example/rooms/{operation_id}.ics", body = "none" }
"""


def kind(text: str) -> KindSpec:
    spec = next(iter(parse_kinds(text, "test.toml")))
    return spec


def secret(name: str) -> str:
    return {"STRIPE_API_KEY": "sk_test_123", "CALDAV_PASSWORD": "pw-456"}[name]


VALUES = Values(operation_id="t1:op-1", params={"charge": "ch_1", "amount": 500})


def test_a_form_request_carries_the_fields_the_credential_and_the_key() -> None:
    refund = kind(REFUND)
    sent = build(refund, "dispatch", VALUES, secret)
    assert sent.method == "POST" and sent.url == "https://payments.example/v1/refunds"
    assert sent.headers["Authorization"] == "Bearer sk_test_123"
    assert sent.headers["Stripe-Version"] == "2024-06-20"
    assert sent.headers["Idempotency-Key"] == "t1:op-1"
    assert sent.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert sent.content is not None
    assert parse_qsl(sent.content.decode()) == [
        ("charge", "ch_1"), ("amount", "500"), ("metadata[operation_id]", "t1:op-1")
    ]  # fmt: skip
    assert sent.secrets == ("sk_test_123",)
    looked = build(refund, "lookup", VALUES, secret)
    assert looked.url == "https://payments.example/v1/refunds?charge=ch_1&limit=100"
    assert looked.content is None and "Idempotency-Key" not in looked.headers


def test_a_text_request_fills_its_template_and_basic_auth() -> None:
    booking = kind(BOOKING)
    sent = build(booking, "dispatch", Values("op:1", {"room": "Ada"}), secret)
    assert sent.method == "PUT" and sent.url == "https://dav.example/rooms/op%3A1.ics"
    assert sent.headers["If-None-Match"] == "*" and sent.headers["Content-Type"] == "text/calendar"
    assert sent.headers["Authorization"] == "Basic " + base64.b64encode(b"agent:pw-456").decode()
    assert sent.content == b"BEGIN:VCALENDAR\r\nUID:op:1\r\nSUMMARY:Ada {x}\r\nEND:VCALENDAR\r\n"
    removed = build(booking, "compensate", Values("op:1", {"room": "Ada"}), secret)
    assert removed.method == "DELETE" and removed.content is None


def test_json_fields_keep_the_type_of_a_lone_placeholder_and_nest() -> None:
    text = REFUND.replace('body = "form", ', "").replace(
        'fields = { charge = "{params.charge}", amount = "{params.amount}", "metadata[operation_id]" = "{operation_id}" }',
        'fields = { amount = "{params.amount}", label = "n{params.amount}", meta = { op = "{operation_id}" } }',
    )
    sent = build(kind(text), "dispatch", VALUES, secret)
    assert json.loads(sent.content or b"") == {"amount": 500, "label": "n500", "meta": {"op": "t1:op-1"}}


def test_a_form_without_fields_flattens_the_params() -> None:
    text = REFUND.replace(
        'fields = { charge = "{params.charge}", amount = "{params.amount}", "metadata[operation_id]" = "{operation_id}" }',
        "",
    ).replace(", , }", " }")
    spec = kind(text.replace('body = "form",  }', 'body = "form" }'))
    params = {"charge": "ch_1", "amount": 5, "note": {"a": True, "b": None, "c": [1, 2]}}
    sent = build(spec, "dispatch", Values("op", params), secret)
    assert parse_qsl((sent.content or b"").decode()) == [
        ("charge", "ch_1"), ("amount", "5"), ("note[a]", "true"), ("note[c][0]", "1"), ("note[c][1]", "2")
    ]  # fmt: skip


def test_a_kind_without_the_new_keys_sends_what_it_sent_before() -> None:
    from settled.domain.kinds import load_kinds

    booking = load_kinds(None).get("room_booking")
    assert booking is not None
    sent = build(booking, "dispatch", Values("op-1", {"room": "Ada", "day": "Thu"}), secret)
    assert sent.headers == {"Idempotency-Key": "op-1", "Content-Type": "application/json"}
    assert sent.content == b'{"room":"Ada","day":"Thu","client_reference":"op-1"}'
    assert build(booking, "compensate", Values("op-1", {}, "b-1"), secret).content == b"{}"


# -- answers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "result"),
    [(200, "confirmed"), (201, "confirmed"), (400, "rejected"), (404, "rejected"), (422, "rejected"),
     (408, "unknown"), (409, "unknown"), (425, "unknown"), (429, "unknown"), (500, "unknown"),
     (503, "unknown"), (302, "unknown"), (101, "unknown")],
)  # fmt: skip
def test_dispatch_answers_are_classified_as_the_contract_says(code: int, result: str) -> None:
    from settled.domain.kinds import load_kinds

    booking = load_kinds(None).get("room_booking")
    assert booking is not None and booking.dispatch is not None
    assert classify_dispatch(booking, booking.dispatch, code, {"id": "x"}, VALUES).result == result


def test_transport_failures_are_classified_as_the_contract_says() -> None:
    assert classify_dispatch_transport("not_connected", "refused").result == "not_sent"
    assert classify_dispatch_transport("broken", "reset").result == "unknown"
    assert classify_dispatch_transport("timeout", "read").result == "unknown"


def test_a_mapped_status_decides_before_the_general_rules() -> None:
    booking = kind(BOOKING)
    assert booking.dispatch is not None
    applied = classify_dispatch(booking, booking.dispatch, 412, None, VALUES)
    assert applied.result == "confirmed" and applied.business_ref is None
    assert classify_dispatch(booking, booking.dispatch, 400, None, VALUES).result == "rejected"


def test_wrong_credentials_are_told_as_such() -> None:
    refund = kind(REFUND)
    assert refund.dispatch is not None
    body = {"error": {"message": "Invalid API Key provided"}}
    refused = classify_dispatch(refund, refund.dispatch, 401, body, VALUES)
    assert refused.result == "rejected" and "refused our credentials" in refused.detail


@pytest.mark.parametrize(
    ("status", "result"),
    [("succeeded", "confirmed"), ("pending", "pending"), ("failed", "rejected"), ("canceled", "rejected")],
)
def test_an_accepted_answer_is_not_done(status: str, result: str) -> None:
    refund = kind(REFUND)
    assert refund.dispatch is not None
    body = {"id": "re_1", "status": status}
    outcome = classify_dispatch(refund, refund.dispatch, 200, body, VALUES)
    assert outcome.result == result
    if result != "rejected":
        assert outcome.business_ref == "re_1"


def lookup(body: Any, code: int = 200) -> str:
    refund = kind(REFUND)
    assert refund.lookup is not None
    return classify_lookup(refund, refund.lookup, code, body, VALUES).result


def test_found_picks_ours_from_a_list_and_an_empty_one_is_a_404() -> None:
    others = [{"id": "re_0", "status": "succeeded", "metadata": {"operation_id": "someone-else"}}]
    ours = {"id": "re_1", "status": "pending", "metadata": {"operation_id": "t1:op-1"}}
    assert lookup({"data": []}) == "not_applied"
    assert lookup({"data": others}) == "not_applied"  # another refund of the charge is not ours
    assert lookup({"data": [*others, ours]}) == "pending"
    assert lookup({"data": [{**ours, "status": "succeeded"}]}) == "applied"
    assert lookup({"data": [{**ours, "status": "failed"}]}) == "rejected"
    assert lookup(None, 500) == "inconclusive"


def test_a_placeholder_in_an_expression_is_a_json_literal() -> None:
    quoted = Values(operation_id='it\'s "odd" `x`', params={"charge": "ch"})
    refund = kind(REFUND)
    assert refund.lookup is not None
    body = {
        "data": [{"id": "re_9", "status": "succeeded", "metadata": {"operation_id": quoted.operation_id}}]
    }
    assert classify_lookup(refund, refund.lookup, 200, body, quoted).business_ref == "re_9"


def test_reversed_when_marks_a_found_write_reversed() -> None:
    text = BOOKING.replace(
        "authoritative = true }", "authoritative = true, reversed_when = \"status == 'cancelled'\" }", 1
    )
    booking = kind(text)
    assert booking.lookup is not None
    found = classify_lookup(booking, booking.lookup, 200, {"status": "cancelled"}, VALUES)
    assert found.result == "applied" and found.reversed
    assert not classify_lookup(booking, booking.lookup, 200, {"status": "booked"}, VALUES).reversed


def test_a_delete_answered_404_or_410_has_reversed_it() -> None:
    booking = kind(BOOKING)
    assert booking.compensate is not None
    for code in (200, 204, 404, 410):
        assert classify_compensation(booking.compensate, code, None).result == "compensated"
    assert classify_compensation(booking.compensate, 403, None).result == "rejected"
    assert classify_compensation(booking.compensate, 503, None).result == "unknown"
