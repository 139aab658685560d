"""Real services for the tests, from PyPI: localstripe (a Stripe API emulator) and Radicale (a CalDAV
server), each a child process on a free loopback port; their own records read over HTTP, the ground
truth a test judges by (never settled's word); and settled's fault proxy (settled.drill.proxy) in front
of each, in a thread with an event loop of its own, so it keeps serving while a test blocks.

Facts the tests rely on (localstripe 1.15.10, Radicale 3.9.0):
- localstripe accepts any key that starts with `sk_` (bearer or basic) and answers anything else with
  401 `{"error": {"message": "Unauthorized", "type": "invalid_request_error"}}`. It ignores
  Idempotency-Key: the same POST sent twice makes two refunds. Every refund it makes is `succeeded` at
  once, whatever the amount; a refund of a failed (declined) charge is a 400 "Cannot refund a failed
  payment.". Unknown form fields are a 400 "Unexpected ...". A charge needs a `pm_`/`card_`/`src_`
  source (not `tok_visa`): the harness makes a card payment method first.
- Radicale answers a PUT with `If-None-Match: *` 201 when it creates, 412 when the item exists; GET
  200/404; DELETE 200 (a multistatus body) then 404; a wrong password 401 with `WWW-Authenticate`;
  a second item with the same UID in one calendar 409 (`no-uid-conflict`).
"""

import asyncio
import secrets
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
from settled.drill.proxy import Exchange, FaultProxy, ProxyFault, ProxyMode

from settled.runtime.stack import Child, free_port, wait_until

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 10.0


# -- localstripe ------------------------------------------------------------------------------------


@dataclass
class LocalStripe:
    """localstripe as a child process (tests/services/localstripe_loopback.py)."""

    log_dir: Path
    api_key: str = field(default_factory=lambda: "sk_test_" + secrets.token_hex(12))
    port: int = 0
    child: Child | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LocalStripe":
        self.port = free_port()
        argv = [sys.executable, "-m", "tests.services.localstripe_loopback", "--port", str(self.port)]
        env = {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}
        self.child = Child("localstripe", argv, env, self.log_dir / "localstripe.log").start()
        wait_until(self._ready, START_TIMEOUT_S, "localstripe", self.child)
        return self

    def _ready(self) -> bool:
        answer = httpx.get(f"{self.url}/v1/charges", headers=self.auth_headers(), timeout=1.0)
        return answer.status_code == 200

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()

    def records(self, base_url: str | None = None) -> "StripeRecords":
        return StripeRecords(
            httpx.Client(base_url=base_url or self.url, headers=self.auth_headers(), timeout=10)
        )


class StripeRecords:
    """localstripe's own records over its API: charges to refund, and the refunds it holds."""

    GOOD_CARD = "4242424242424242"
    DECLINED_CARD = "4000000000000341"  # attaches, then every charge on it is declined

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def close(self) -> None:
        self.http.close()

    def _payment_method(self, number: str) -> str:
        card = {"card[number]": number, "card[exp_month]": "12", "card[exp_year]": "2030", "card[cvc]": "123"}
        answer = self.http.post("/v1/payment_methods", data={"type": "card", **card})
        assert answer.status_code == 200, answer.text
        return answer.json()["id"]

    def charge(self, amount: int = 5000, currency: str = "eur") -> str:
        """A succeeded charge to refund; its id."""
        source = self._payment_method(self.GOOD_CARD)
        answer = self.http.post(
            "/v1/charges", data={"amount": amount, "currency": currency, "source": source}
        )
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
        return answer.json()["id"]

    def declined_charge(self, amount: int = 5000) -> str:
        """A charge the card declined (localstripe keeps it, `failed`): refunding it is refused."""
        source = self._payment_method(self.DECLINED_CARD)
        answer = self.http.post("/v1/charges", data={"amount": amount, "currency": "eur", "source": source})
        assert answer.status_code == 402, answer.text
        return answer.json()["error"]["charge"]

    def refunds(self, charge: str) -> list[dict[str, Any]]:
        """Every refund of the charge, newest first."""
        answer = self.http.get("/v1/refunds", params={"charge": charge, "limit": 100})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert not body["has_more"], "more than 100 refunds of one test charge"
        return body["data"]

    def refunds_for(self, charge: str, operation_key: str) -> list[dict[str, Any]]:
        """The charge's refunds that carry this operation key in metadata.operation_id."""
        return [
            r for r in self.refunds(charge) if (r.get("metadata") or {}).get("operation_id") == operation_key
        ]

    def refund(self, refund_id: str) -> dict[str, Any] | None:
        answer = self.http.get(f"/v1/refunds/{refund_id}")
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        return answer.json()

    def refund_outside(self, charge: str, amount: int, note: str = "refunded by hand") -> dict[str, Any]:
        """A refund of the charge made outside settled (a support agent in the dashboard)."""
        answer = self.http.post(
            "/v1/refunds", data={"charge": charge, "amount": amount, "metadata[note]": note}
        )
        assert answer.status_code == 200, answer.text
        return answer.json()


# -- Radicale -----------------------------------------------------------------------------------------


@dataclass
class Radicale:
    """Radicale as a child process: htpasswd (plain) auth for one user, storage and config in `folder`,
    owner-only rights, and one calendar, /USER/rooms/, made at start."""

    folder: Path
    user: str = "agent"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    calendar: str = "rooms"
    port: int = 0
    child: Child | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def calendar_path(self) -> str:
        return f"/{self.user}/{self.calendar}/"

    def start(self) -> "Radicale":
        self.port = free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        users = self.folder / "users"
        users.write_text(f"{self.user}:{self.password}\n")
        config = self.folder / "config"
        config.write_text(
            "[server]\n"
            f"hosts = 127.0.0.1:{self.port}\n"
            "[auth]\n"
            "type = htpasswd\n"
            f"htpasswd_filename = {users}\n"
            "htpasswd_encryption = plain\n"
            "delay = 0\n"  # no pause after a wrong password: the 401 test stays quick
            "[rights]\n"
            "type = owner_only\n"
            "[storage]\n"
            f"filesystem_folder = {self.folder / 'collections'}\n"
            "[web]\n"
            "type = none\n"
            "[logging]\n"
            "level = warning\n"
            "mask_passwords = True\n"
        )
        argv = [sys.executable, "-m", "radicale", "--config", str(config)]
        env = {"PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}
        self.child = Child("radicale", argv, env, self.folder / "radicale.log").start()
        wait_until(self._ready, START_TIMEOUT_S, "Radicale", self.child)
        made = httpx.request(
            "MKCALENDAR", self.url + self.calendar_path, auth=self.auth, timeout=CALL_TIMEOUT_S
        )
        assert made.status_code == 201, made.text
        return self

    @property
    def auth(self) -> tuple[str, str]:
        return (self.user, self.password)

    def _ready(self) -> bool:
        answer = httpx.request(
            "PROPFIND", f"{self.url}/{self.user}/", auth=self.auth, headers={"Depth": "0"}, timeout=1.0
        )
        return answer.status_code == 207

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()

    def records(self, base_url: str | None = None) -> "CalendarRecords":
        http = httpx.Client(base_url=base_url or self.url, auth=self.auth, timeout=CALL_TIMEOUT_S)
        return CalendarRecords(http, self.calendar_path)


_DAV = "{DAV:}"


def event_ics(uid: str, summary: str = "Ada", day: str = "20261210") -> str:
    """A minimal VEVENT in a VCALENDAR (CRLF lines), as a client would PUT it."""
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//settled tests//EN",
        "BEGIN:VEVENT",
        f"UID:{uid}",
        "DTSTAMP:20260101T000000Z",
        f"DTSTART;VALUE=DATE:{day}",
        f"SUMMARY:{summary}",
        "END:VEVENT",
        "END:VCALENDAR",
    ]
    return "\r\n".join(lines) + "\r\n"


class CalendarRecords:
    """The calendar's own records over CalDAV: which events it holds, and each one's text."""

    def __init__(self, http: httpx.Client, calendar_path: str) -> None:
        self.http = http
        self.calendar_path = calendar_path

    def close(self) -> None:
        self.http.close()

    def names(self) -> list[str]:
        """The calendar's items (`{uid}.ics`), from a depth-1 PROPFIND."""
        body = '<?xml version="1.0"?><propfind xmlns="DAV:"><prop><getetag/></prop></propfind>'
        answer = self.http.request(
            "PROPFIND",
            self.calendar_path,
            headers={"Depth": "1", "Content-Type": "application/xml"},
            content=body,
        )
        assert answer.status_code == 207, answer.text
        hrefs = [href.text or "" for href in ET.fromstring(answer.text).iter(f"{_DAV}href")]
        return sorted(href.rsplit("/", 1)[-1] for href in hrefs if href.endswith(".ics"))

    def events_with(self, text: str) -> list[str]:
        """The items whose name or text contains `text` (an operation key is in both)."""
        return [name for name in self.names() if text in name or text in (self.event(name) or "")]

    def event(self, name: str) -> str | None:
        answer = self.http.get(self.calendar_path + name)
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        return answer.text

    def put(self, name: str, ics: str, create_only: bool = True) -> httpx.Response:
        headers = {"Content-Type": "text/calendar; charset=utf-8"}
        if create_only:
            headers["If-None-Match"] = "*"
        return self.http.put(self.calendar_path + name, content=ics.encode(), headers=headers)

    def delete(self, name: str) -> httpx.Response:
        return self.http.delete(self.calendar_path + name)


# -- the fault proxy, in a thread of its own --------------------------------------------------------


class ProxyThread:
    """settled's FaultProxy (settled/drill/proxy.py) served by an event loop in a daemon thread: the
    tests are synchronous and block while they wait, and the session's asyncio loop runs only while an
    async test awaits. Every touch of the proxy's state goes through that loop."""

    def __init__(self, upstream: str, name: str) -> None:
        self.upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{name}", daemon=True)
        self._proxy: FaultProxy | None = None

    def start(self) -> "ProxyThread":
        self._thread.start()
        self._proxy = self._run(FaultProxy(self.upstream).start())
        return self

    def stop(self) -> None:
        if self._proxy is not None:
            self._run(self._proxy.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CALL_TIMEOUT_S)
        self._loop.close()

    @property
    def proxy(self) -> FaultProxy:
        assert self._proxy is not None, "the proxy is not started"
        return self._proxy

    @property
    def url(self) -> str:
        return self.proxy.url

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT_S)

    def _call(self, function: Callable[[], T]) -> T:
        async def call() -> T:
            return function()

        return self._run(call())

    def fault(self, mode: ProxyMode, **options: Any) -> ProxyFault:
        """Add a fault (settled.drill.proxy.ProxyFault's options: method, path, match, count, delay_s,
        apply); match on the operation key so that no other test's request is caught."""
        return self._call(lambda: self.proxy.add_fault(mode, **options))

    def release(self, fault: ProxyFault) -> None:
        """Let a hold go on (forwarded unless its `apply` is false); the fault fires no more."""
        self._call(lambda: self.proxy.release(fault.id))

    def clear(self) -> None:
        """Retire every fault; held requests go on to the service."""

        def retire_all() -> None:
            for fault in list(self.proxy._faults.values()):
                if not fault.retired:
                    self.proxy.release(fault.id)

        self._call(retire_all)

    def exchanges(self, text: str | None = None) -> list[Exchange]:
        """Snapshots of the requests the proxy saw (involving `text`, when given), oldest first."""

        def snapshot() -> list[Exchange]:
            seen = self.proxy.exchanges if text is None else self.proxy.involving(text)
            return [replace(exchange) for exchange in seen]

        return self._call(snapshot)

    def forwarded(self, text: str, method: str | None = None) -> list[Exchange]:
        """The requests involving `text` that reached the service."""
        return [
            exchange
            for exchange in self.exchanges(text)
            if exchange.forwarded and (method is None or exchange.method == method)
        ]

    def held(self, text: str) -> list[Exchange]:
        return [exchange for exchange in self.exchanges(text) if exchange.held]
