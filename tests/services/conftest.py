"""Fixtures for the tests against real services: localstripe and Radicale as child processes, a fault
proxy in front of each, their own records (the ground truth), and one settled stack for the session
whose kinds are the examples' (examples/kinds/*.toml, examples/handlers/) pointed at the proxies."""

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from settled.domain.kinds import kinds_toml
from settled.runtime.stack import Stack
from tests.helpers import FAST, api_client
from tests.services.servers import (
    REPO,
    CalendarRecords,
    LocalStripe,
    ProxyThread,
    Radicale,
    StripeRecords,
)

EXAMPLES = REPO / "examples" / "kinds"
STRIPE_BASE = "https://api.stripe.com"
CALDAV_BASE = "https://dav.example.com"
WRONG_STRIPE_KEY = "rk_test_not_a_secret_key"  # localstripe takes only sk_ keys: this one is a 401
WRONG_CALDAV_PASSWORD = "not-the-password"


@pytest.fixture(scope="session")
def localstripe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStripe]:
    server = LocalStripe(tmp_path_factory.mktemp("localstripe"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def radicale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Radicale]:
    server = Radicale(tmp_path_factory.mktemp("radicale"))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stripe_proxy(localstripe: LocalStripe) -> Iterator[ProxyThread]:
    proxy = ProxyThread(localstripe.url, "localstripe").start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def caldav_proxy(radicale: Radicale) -> Iterator[ProxyThread]:
    proxy = ProxyThread(radicale.url, "radicale").start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(autouse=True)
def _clear_proxy_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's faults end with it (held requests go on to the service)."""
    yield
    for name in ("stripe_proxy", "caldav_proxy"):
        if name in request.fixturenames:
            request.getfixturevalue(name).clear()


@pytest.fixture(scope="session")
def stripe_records(localstripe: LocalStripe) -> Iterator[StripeRecords]:
    """localstripe's own records, read directly (never through a proxy)."""
    records = localstripe.records()
    yield records
    records.close()


@pytest.fixture(scope="session")
def calendar(radicale: Radicale) -> Iterator[CalendarRecords]:
    """The calendar's own records, read directly (never through a proxy)."""
    records = radicale.records()
    yield records
    records.close()


# -- one settled stack for the session, on the examples' kinds --------------------------------------

# Fast enough for tests: both services commit a write before they answer it, so a 2 s horizon is safe.
TIMING: dict[str, Any] = {**FAST, "timeout_s": 1.5}


def _pointed(value: Any, bases: dict[str, str]) -> Any:
    """`value` with every URL under one of `bases` moved to its replacement."""
    if isinstance(value, str):
        for old, new in bases.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {key: _pointed(item, bases) for key, item in value.items()}
    if isinstance(value, list):
        return [_pointed(item, bases) for item in value]
    return value


def example_kind(file: str, name: str, bases: dict[str, str], **changes: Any) -> dict[str, Any]:
    """A kind of examples/kinds/FILE, pointed at the test servers, with `changes` (None removes a key)."""
    table = tomllib.loads((EXAMPLES / file).read_text())["kinds"][name]
    table = {**_pointed(table, bases), **TIMING, **changes}
    return {key: value for key, value in table.items() if value is not None}


def service_kinds(stripe_url: str, caldav_url: str) -> dict[str, dict[str, Any]]:
    """The examples' kinds, pointed at the proxies. Every test creates its actions authorized."""
    stripe = {STRIPE_BASE: stripe_url}
    caldav = {CALDAV_BASE: caldav_url}
    # localstripe ignores Idempotency-Key (the same POST twice makes two refunds), so the refund kind
    # must not claim it deduplicates: without the header, a lost answer is looked up, never re-sent.
    plain = {"idempotency_header": None, "idempotency_window_s": None}
    refund = example_kind("payments.toml", "refund", stripe, **plain)
    booking = example_kind("calendar.toml", "room_booking", caldav)
    return {
        "refund": refund,
        "refund_wrong_key": {**refund, "auth": {"type": "bearer", "token": "{secret.WRONG_STRIPE_KEY}"}},
        # A refund whose service may commit up to 6 s after the client gave up: room for a test to
        # release a held request after settled's timeout and before its lookups may conclude.
        "refund_late": {**refund, "commit_horizon_s": 6.0},
        "room_booking": booking,
        "room_booking_wrong_password": {
            **booking,
            "auth": {**booking["auth"], "password": "{secret.WRONG_CALDAV_PASSWORD}"},
        },
        # The same refund through the official SDK (examples/handlers/stripe_refund.py).
        "refund_sdk": {
            "description": refund["description"],
            "params_schema": refund["params_schema"],
            "handler": "examples.handlers.stripe_refund:refund",
            **TIMING,
        },
    }


def service_env(localstripe: LocalStripe, radicale: Radicale, stripe_proxy: ProxyThread) -> dict[str, str]:
    return {
        "STRIPE_API_KEY": localstripe.api_key,
        "WRONG_STRIPE_KEY": WRONG_STRIPE_KEY,
        "CALDAV_PASSWORD": radicale.password,
        "WRONG_CALDAV_PASSWORD": WRONG_CALDAV_PASSWORD,
        "STRIPE_API_BASE": stripe_proxy.url,  # the SDK handler's base address
        "PYTHONPATH": str(REPO),  # the workers import examples.handlers wherever pytest runs from
    }


@pytest.fixture(scope="session")
def services_stack(
    tmp_path_factory: pytest.TempPathFactory,
    localstripe: LocalStripe,
    radicale: Radicale,
    stripe_proxy: ProxyThread,
    caldav_proxy: ProxyThread,
) -> Iterator[Stack]:
    data_dir: Path = tmp_path_factory.mktemp("services-stack")
    text = kinds_toml(service_kinds(stripe_proxy.url, caldav_proxy.url))
    env = service_env(localstripe, radicale, stripe_proxy)
    stack = Stack.on_free_ports(data_dir, text, sandbox=False, ui=False, extra_env=env)
    with stack.running():
        yield stack


@pytest.fixture(scope="session")
def services_api(services_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(services_stack) as client:
        yield client
