"""Signed page links: the token itself, and the page and /v1 routes behind API keys.

The keyed tests run the real API app in-process, on the session stack's Temporal and sandbox, where
`api.access` lets a link token through on the page's routes only, and drive the page through it in
the browser.
"""

import base64
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from settled.api.app import create_app
from settled.api.page.links import mint_link

from settled.domain.kinds import Variant, sandbox_kinds_text
from settled.runtime.config import Settings, parse_api_keys
from settled.runtime.stack import Stack, free_port
from settled.tokens import PAGE_LINK, TokenError, sign, verify
from tests.helpers import BOOKING, Sandbox, new_id, wait_for
from tests.page.conftest import CHROMIUM, Watched, only_record

if CHROMIUM.exists():
    from playwright.sync_api import Page, expect

KEY_A, KEY_A_NEW, KEY_B = "key-aaaa-1111", "key-aaaa-2222", "key-bbbb-3333"
KEYS = parse_api_keys(f"tenant_a:{KEY_A},tenant_b:{KEY_B},tenant_a:{KEY_A_NEW}")
KEYED = Settings(api_keys=KEYS)


def token_of(url: str) -> str:
    return url.split("?t=", 1)[1]


# -- the token ------------------------------------------------------------------------------------


def test_a_link_opens_its_tenant_and_conversation() -> None:
    url = mint_link(KEYED, "c-42", "tenant_a", base_url="https://assist.example/")
    assert url.startswith("https://assist.example/c/c-42?t=sl1.")
    link = verify(PAGE_LINK, token_of(url), KEYS)
    assert (link.tenant, link.conversation_id, link.expires_at) == ("tenant_a", "c-42", None)


def test_without_api_keys_the_link_carries_no_token() -> None:
    assert mint_link(Settings(), "c-42") == "/c/c-42"
    with pytest.raises(ValueError, match="no API keys"):
        mint_link(Settings(), "c-42", "tenant_a")


def test_minting_needs_a_tenant_with_a_key_and_a_valid_id() -> None:
    with pytest.raises(ValueError, match="name the tenant"):
        mint_link(KEYED, "c-42")
    with pytest.raises(ValueError, match="no API key"):
        mint_link(KEYED, "c-42", "tenant_z")
    with pytest.raises(ValueError, match="conversation id"):
        mint_link(KEYED, "c 42", "tenant_a")


def test_an_expired_link_is_refused_and_an_unexpired_one_is_not() -> None:
    url = mint_link(KEYED, "c-42", "tenant_a", ttl_s=60, now=1_000_000)
    assert verify(PAGE_LINK, token_of(url), KEYS, now=1_000_059).expires_at == 1_000_060
    with pytest.raises(TokenError, match="expired"):
        verify(PAGE_LINK, token_of(url), KEYS, now=1_000_060)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "sl1.",
        "sl1.a.b",
        "sl1.a.b.c",
        "not-a-link",
        sign(PAGE_LINK, KEY_B, "tenant_a", "c-42", None),  # signed with another tenant's key
        sign(PAGE_LINK, "key-nobody-999", "tenant_a", "c-42", None),
        sign(PAGE_LINK, KEY_A, "tenant_a", "c-42", None)[:-2] + "AA",  # a forged signature
    ],
)
def test_a_token_not_signed_by_its_tenants_key_is_refused(token: str) -> None:
    with pytest.raises(TokenError, match="not valid"):
        verify(PAGE_LINK, token, KEYS)


def test_the_signed_fields_cannot_be_changed() -> None:
    genuine = sign(PAGE_LINK, KEY_A, "tenant_a", "c-42", None)
    _, signature = genuine[len("sl1.") :].split(".")
    for payload in (b"tenant_b\nc-42\n", b"tenant_a\nc-43\n", b"tenant_a\nc-42\n9999999999"):
        forged = "sl1." + base64.urlsafe_b64encode(payload).rstrip(b"=").decode() + "." + signature
        with pytest.raises(TokenError):
            verify(PAGE_LINK, forged, KEYS)


def test_any_key_of_the_tenant_verifies_so_keys_can_rotate() -> None:
    assert verify(PAGE_LINK, sign(PAGE_LINK, KEY_A_NEW, "tenant_a", "c-42", None), KEYS).tenant == "tenant_a"
    rotated = {KEY_A_NEW: "tenant_a"}  # the old key is gone: links signed with it end
    with pytest.raises(TokenError):
        verify(PAGE_LINK, sign(PAGE_LINK, KEY_A, "tenant_a", "c-42", None), rotated)


# -- behind API keys, on the real stack ------------------------------------------------------------


def page_kinds(closed_url: str) -> dict[str, Variant]:
    """Kinds for the page's own in-process API: the sandbox booking with a long timeout (a held write
    stays "running"), and a service nobody listens on at `closed_url` (an authorized request stays
    queued: a connection never made is retried, never counted as sent)."""
    return {
        "room_booking": Variant(
            "room_booking",
            {
                "timeout_s": 60.0,
                "commit_horizon_s": None,
                "reconcile_initial_interval_s": 0.2,
                "reconcile_max_interval_s": 1.0,
            },
        ),
        "parcel": Variant(
            None,
            {
                "description": "send the parcel",
                "params_schema": {
                    "type": "object",
                    "required": ["to"],
                    "properties": {"to": {"type": "string"}},
                },
                "dispatch": {"method": "POST", "url": f"{closed_url}/parcels"},
                "timeout_s": 1.0,
                "connect_retry_max_interval_s": 600,
            },
        ),
    }


@pytest.fixture(scope="module")
def keyed_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API app with keys, in-process on the session's Temporal (the stack's worker runs the work)."""
    folder = tmp_path_factory.mktemp("keyed")
    closed = free_port()  # nothing listens there: a connection is never made
    kinds = folder / "kinds.toml"
    kinds.write_text(sandbox_kinds_text(stack.sandbox_url, page_kinds(f"http://127.0.0.1:{closed}")))
    settings = Settings(
        temporal_address=stack.temporal_address,
        config_path=kinds,
        api_keys=KEYS,
        sandbox_url=stack.sandbox_url,
    )
    app = create_app(settings)
    port = free_port()
    while port == closed:
        port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="the in-process API")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def keyed(keyed_api: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=keyed_api, timeout=40) as client:
        yield client


def as_key(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def booking(keyed: httpx.Client, conversation: str, **extra: Any) -> str:
    body = {"conversation_id": conversation, "kind": "room_booking", "params": BOOKING, **extra}
    body.setdefault("operation_id", new_id())
    response = keyed.post("/v1/actions", json=body, headers=as_key(KEY_A))
    assert response.status_code == 201, response.text
    return body["operation_id"]


def test_the_page_opens_only_with_its_own_link(keyed: httpx.Client, conversation: str) -> None:
    url = mint_link(KEYED, conversation, "tenant_a")
    page = keyed.get(url)
    assert page.status_code == 200 and f"<code>{conversation}</code>" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
    refusals = [
        f"/c/{conversation}",
        f"/c/{conversation}?t=sl1.nope.nope",
        f"/c/{conversation}?t={KEY_A}",  # an API key in a URL is no link
        f"/c/{conversation}?t={token_of(mint_link(KEYED, 'another-conversation', 'tenant_a'))}",
        f"/c/{conversation}?t={token_of(mint_link(KEYED, conversation, 'tenant_a', ttl_s=-1))}",
    ]
    for refused in refusals:
        response = keyed.get(refused)
        assert response.status_code == 401, refused
        assert "<h1>This link can&#x27;t be opened</h1>" in response.text
    assert keyed.get("/c/not%20an%20id").status_code == 404


def test_a_link_token_opens_the_pages_routes_for_its_conversation_only(
    keyed: httpx.Client, conversation: str
) -> None:
    op = booking(keyed, conversation)
    elsewhere = booking(keyed, new_id("conv"))  # same tenant, another conversation
    link = as_key(token_of(mint_link(KEYED, conversation, "tenant_a")))
    base = f"/v1/conversations/{conversation}"
    assert keyed.get(f"{base}/handoff", headers=link).json()["actions"][0]["operation_id"] == op
    assert keyed.get(f"/v1/actions/{op}", headers=link).status_code == 200
    assert keyed.post(f"/v1/actions/{op}/reconcile", headers=link).status_code == 200
    event = {"type": "channel_opened", "channel": "text"}
    assert keyed.post(f"{base}/events", json=event, headers=link).status_code == 202
    with keyed.stream("GET", f"{base}/stream", params={"t": link["Authorization"][7:]}) as stream:
        assert stream.status_code == 200
        assert next(line for line in stream.iter_lines() if line.startswith("data:"))

    # Not another conversation, its actions, another tenant's, or the routes that ask for new work.
    assert keyed.get(f"/v1/conversations/{new_id('conv')}/handoff", headers=link).status_code == 401
    assert keyed.get(f"/v1/actions/{elsewhere}", headers=link).status_code == 404
    assert keyed.post(f"/v1/actions/{elsewhere}/cancel", headers=link).status_code == 404
    new = {"conversation_id": conversation, "kind": "room_booking", "params": BOOKING}
    assert keyed.post("/v1/actions", json=new, headers=link).status_code == 401
    amend = {"params": {"room": "Ada", "day": "Friday"}}
    assert keyed.post(f"/v1/actions/{op}/amend", json=amend, headers=link).status_code == 401
    assert keyed.get(f"{base}/handoff").status_code == 401
    assert keyed.get(f"{base}/handoff", params={"t": "sl1.forged.token"}).status_code == 401
    other_tenant = as_key(token_of(mint_link(KEYED, conversation, "tenant_b")))
    assert keyed.get(f"/v1/actions/{op}", headers=other_tenant).status_code == 404
    # API keys work as before, beside links.
    assert keyed.get(f"/v1/actions/{op}", headers=as_key(KEY_A)).status_code == 200
    assert keyed.get(f"/v1/actions/{op}", headers=as_key(KEY_B)).status_code == 404
    assert keyed.get(f"/v1/actions/{op}", headers=as_key("key-wrong-000")).status_code == 401


def test_the_page_behind_api_keys_queued_sending_and_go_ahead(
    open_browser: Callable[..., Watched],
    keyed_api: str,
    keyed: httpx.Client,
    sandbox: Sandbox,
    conversation: str,
    snap: Callable[["Page", str], Path],
) -> None:
    web = open_browser(keyed_api)
    parcel = new_id()
    body = {
        "conversation_id": conversation,
        "operation_id": parcel,
        "kind": "parcel",
        "params": {"to": "Ada"},
    }
    assert keyed.post("/v1/actions", json=body, headers=as_key(KEY_A)).status_code == 201
    held = new_id()
    hold = sandbox.fault("bookings", "create", "hold", f"tenant_a:{held}", apply=True)
    booking(keyed, conversation, operation_id=held, authorized=True)
    sandbox.wait_held(f"tenant_a:{held}")
    waiting = booking(keyed, conversation)

    page = web.open(conversation, token_of(mint_link(KEYED, conversation, "tenant_a", ttl_s=600)))
    expect(page.locator("#banner-title")).to_have_text("Work is continuing")
    expect(web.card(parcel).locator(".state")).to_have_text("Queued")
    expect(web.card(parcel).locator(".say")).to_have_text(
        "Nothing has been sent yet; the request to send the parcel is queued and will be sent shortly."
    )
    expect(web.card(held).locator(".state")).to_have_text("Sending")
    expect(web.card(held).locator(".say")).to_have_text(
        "I'm sending the request to reserve the meeting room now; it isn't confirmed yet."
    )
    expect(web.card(waiting).locator(".state")).to_have_text("Waiting for your go-ahead")
    snap(page, "queued-and-sending")

    web.card(waiting).get_by_role("button", name="Go ahead").click()  # through the link token
    expect(web.card(waiting).locator(".state")).to_have_text("Confirmed")
    record = only_record(sandbox, f"tenant_a:{waiting}")
    expect(web.card(waiting).locator(".ref")).to_have_text(f"Reference: {record['id']}")
    sandbox.release(hold)
    expect(web.card(held).locator(".state")).to_have_text("Confirmed")
    web.card(parcel).get_by_role("button", name="Cancel this").click()
    expect(web.card(parcel).locator(".state")).to_have_text("Cancelled")
    expect(page.locator("#banner-title")).to_have_text("Stopped")

    def presented() -> dict[str, Any] | None:
        status = keyed.get(f"/v1/actions/{waiting}", headers=as_key(KEY_A)).json()
        shown = status["presented"]
        return status if shown and shown["state"] == "confirmed" and shown["text"] == status["say"] else None

    status = wait_for(presented, what="the page to record what it presented")
    assert status["presented"]["channel"] == "text" and status["presented"]["text"] == status["say"]


def test_the_assets_are_served_from_the_api_and_cached_by_version(api: httpx.Client) -> None:
    script = api.get("/c/_assets/page.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert "immutable" in script.headers["cache-control"]
    assert api.get("/c/_assets/page.css").headers["content-type"].startswith("text/css")
    assert api.get("/c/_assets/secrets.txt").status_code == 404
    page = api.get("/c/c-42")  # without API keys the page is open
    assert page.status_code == 200
    assert all(f"/c/_assets/{name}?v=" in page.text for name in ("page.js", "page.css", "icon.svg"))
    assert "http://" not in page.text and "https://" not in page.text  # nothing from elsewhere
