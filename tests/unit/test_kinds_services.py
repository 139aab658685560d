# ruff: noqa: E501 -- the kinds files are written as a team writes them: one request a line
"""The kinds file's keys for real services: every one validated at start-up, naming the kind and key."""

from pathlib import Path

import pytest

from settled.domain.kinds import KindsFileError, parse_kinds
from tests.unit.test_answers import BOOKING, REFUND


def test_the_two_real_service_examples_are_valid() -> None:
    refund = next(iter(parse_kinds(REFUND, "k.toml")))
    booking = next(iter(parse_kinds(BOOKING, "k.toml")))
    assert refund.secret_names() == {"STRIPE_API_KEY"} and booking.secret_names() == {"CALDAV_PASSWORD"}
    assert refund.deduplicates and not refund.compensable and refund.answers_unfinished
    assert booking.deduplicates and booking.compensation_deduplicates  # a DELETE of the record itself


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('url = "https://payments.example/v1/refunds"', 'url = "https://payments.example/{secret.STRIPE_API_KEY}"'),
         "kinds.refund.dispatch.url: {secret.STRIPE_API_KEY} may stand only in auth and header values"),
        (('charge = "{params.charge}"', 'charge = "{secret.STRIPE_API_KEY}"'), "kinds.refund.dispatch.fields.charge"),
        (('charge = "{params.charge}"', 'charge = "{params.nope}"'), "unknown placeholder {params.nope}"),
        (("found = \"data[?metadata.operation_id == {operation_id}] | [0]\"", 'found = "data[?"'),
         "kinds.refund.lookup.found: not a valid JMESPath expression"),
        (("confirmed_when = \"status == 'succeeded'\"", 'confirmed_when = "status =="'),
         "kinds.refund.confirmed_when: not a valid JMESPath"),
        (('"Stripe-Version" = "2024-06-20"', '"Stripe-Version" = "{business_ref}"'),
         "kinds.refund.headers.Stripe-Version: unknown placeholder {business_ref}"),
        (('"Stripe-Version" = "2024-06-20"', '"Bad Header" = "x"'), "is not an HTTP header name"),
        (('token = "{secret.STRIPE_API_KEY}"', 'username = "x"'), "kinds.refund.auth"),
        (('body = "form"', 'body = "xml"'), "kinds.refund.dispatch.body"),
        (('body = "form"', 'body = "text"'), "kinds.refund.dispatch.fields: only a json or form body has fields"),
        (('idempotency_window_s = 86400.0', 'idempotency_window_s = 0'), "kinds.refund.idempotency_window_s"),
        (('reference_field = "id"', 'reference_field = "id"\nbogus = 1'), "kinds.refund.bogus: unknown key"),
        (('idempotency_header = "Idempotency-Key"', 'handler = "app.pay:refund"'), "kinds.refund.handler: a code kind takes no HTTP keys"),
        (('authoritative = true, found', 'statuses = { 404 = "rejected" }, found'),
         "kinds.refund.lookup.statuses.404: 'rejected' is not one of applied, not_applied, unknown"),
        (('body = "form"', 'statuses = { 999 = "applied" }, body = "form"'), "999 is not an HTTP status code"),
    ],
)  # fmt: skip
def test_a_bad_key_is_refused_naming_the_kind_and_key(change: tuple[str, str], named: str) -> None:
    old, new = change
    assert old in REFUND
    with pytest.raises(KindsFileError) as refused:
        parse_kinds(REFUND.replace(old, new, 1), "my-kinds.toml")
    assert str(refused.value).startswith("my-kinds.toml: kinds.refund") and named in str(refused.value)


def test_a_template_needs_a_text_body_and_a_text_body_a_template() -> None:
    with pytest.raises(KindsFileError, match="only a text body"):
        parse_kinds(BOOKING.replace('body = "text", ', ""), "k.toml")
    with pytest.raises(KindsFileError, match="needs template and content_type"):
        parse_kinds(BOOKING.replace('content_type = "text/calendar", ', ""), "k.toml")


def test_finished_answers_need_a_lookup() -> None:
    text = REFUND.split("lookup = ")[0] + "confirmed_when = \"status == 'succeeded'\"\n"
    with pytest.raises(KindsFileError, match="confirmed_when/failed_when need a lookup"):
        parse_kinds(text, "k.toml")


CODE_KIND = """
[kinds.refund]
description = "refund the payment"
handler = "tests.unit.handler_samples:refund"
timeout_s = 1.0
"""


def test_a_code_kind_is_imported_and_its_traits_carried() -> None:
    from settled.business.code import with_handlers

    kinds, handlers = with_handlers(parse_kinds(CODE_KIND, "k.toml"))
    refund = kinds.get("refund")
    assert refund is not None and refund.handler_traits is not None
    assert (
        refund.deduplicates and refund.has_lookup and refund.authoritative_lookup and not refund.compensable
    )
    assert set(handlers) == {"refund"}


@pytest.mark.parametrize(
    ("handler", "named"),
    [("tests.unit.no_such_module:refund", "cannot import tests.unit.no_such_module"),
     ("tests.unit.handler_samples:nothing", "has no attribute nothing"),
     ("tests.unit.handler_samples:no_dispatch", "has no dispatch method"),
     ("tests.unit.handler_samples:sync_dispatch", "must be an async method")],
)  # fmt: skip
def test_a_handler_that_cannot_be_used_refuses_start_up(handler: str, named: str) -> None:
    from settled.business.code import HandlerError, with_handlers

    with pytest.raises(HandlerError, match=named):
        with_handlers(parse_kinds(CODE_KIND.replace("tests.unit.handler_samples:refund", handler), "k.toml"))


def test_the_examples_shipped_are_valid_and_their_handler_imports() -> None:
    from settled.business.code import with_handlers
    from settled.domain.kinds import load_kinds

    examples = Path(__file__).parents[2] / "examples" / "kinds"
    for name in ("payments.toml", "calendar.toml"):
        assert load_kinds(examples / name).names()
    text = CODE_KIND.replace("tests.unit.handler_samples:refund", "examples.handlers.stripe_refund:refund")
    kinds, _ = with_handlers(parse_kinds(text, "k.toml"))
    refund = kinds.get("refund")
    assert refund is not None and refund.has_lookup and refund.authoritative_lookup and not refund.compensable
