"""Fixtures for the text page in a real browser: Debian's Chromium, driven by Playwright.

The browser is the system's (/usr/bin/chromium); Playwright's own browser downloads are never used.
Every page is watched: a script error, or a request to anywhere but the API under test, fails the test.
Screenshots go to pytest's tmp dir; with SETTLED_UPDATE_SCREENSHOTS=1 each is also copied to
docs/screenshots/ (opt-in, so a test run never dirties the tree).
"""

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import Sandbox, new_id

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# Generous for a loaded machine; every wait ends as soon as its condition holds.
EXPECT_TIMEOUT_MS = 15_000

if CHROMIUM.exists():
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)


# Per module, not per session: while sync Playwright runs, its event loop counts as running in this
# thread, and the async tests of later modules (pytest-asyncio) could not start theirs.
@pytest.fixture(scope="module")
def playwright() -> Iterator["Playwright"]:
    if not CHROMIUM.exists():
        pytest.skip(f"the page tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: "Playwright") -> Iterator["Browser"]:
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield launched
    launched.close()


@dataclass
class Watched:
    """A browser page on one API, with what it did that a test may check."""

    page: "Page"
    base_url: str
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    posts: list[tuple[str, Any]] = field(default_factory=list)  # (path, JSON body) of every POST

    def open(self, conversation: str, token: str | None = None) -> "Page":
        """Open the conversation's page and wait until it shows the records and is live."""
        query = f"?t={token}" if token else ""
        self.page.goto(f"{self.base_url}/c/{conversation}{query}")
        expect(self.page.locator("body")).to_have_attribute("data-ready", "true")
        expect(self.page.locator("#connection")).to_have_attribute("data-connection", "live")
        return self.page

    def card(self, operation_id: str) -> Any:
        return self.page.locator(f'li.card[data-operation="{operation_id}"]')

    def presented(self, operation_id: str) -> list[str]:
        """The texts this page recorded as presented for an action, in order."""
        path = f"/v1/actions/{operation_id}/presented"
        return [body["text"] for sent, body in self.posts if sent == path]


def _watch(context: "BrowserContext", base_url: str) -> Watched:
    page = context.new_page()
    page.set_default_timeout(EXPECT_TIMEOUT_MS)
    watched = Watched(page, base_url)
    page.on("pageerror", lambda error: watched.errors.append(str(error)))
    page.on(
        "console",
        lambda message: watched.errors.append(message.text) if message.type == "error" else None,
    )

    def on_request(request: Any) -> None:
        if not request.url.startswith(base_url + "/"):
            watched.foreign.append(request.url)
        elif request.method == "POST":
            path = request.url[len(base_url) :].split("?")[0]
            watched.posts.append((path, request.post_data_json))

    page.on("request", on_request)
    return watched


@pytest.fixture
def open_browser(browser: "Browser") -> Iterator[Callable[..., Watched]]:
    """Pages on an API (the session stack's by default), checked after the test."""
    contexts: list[BrowserContext] = []
    watched: list[Watched] = []

    def opener(base_url: str, **context_options: Any) -> Watched:
        context = browser.new_context(**{"viewport": {"width": 900, "height": 1000}, **context_options})
        contexts.append(context)
        watched.append(_watch(context, base_url))
        return watched[-1]

    yield opener
    for context in contexts:
        context.close()
    for one in watched:
        # A connection the test cut on purpose is reported by Chromium as a console error.
        errors = [e for e in one.errors if "ERR_CONNECTION_REFUSED" not in e and "net::" not in e]
        assert not errors, f"the page reported errors: {errors}"
        assert not one.foreign, f"the page loaded something from elsewhere: {one.foreign}"


@pytest.fixture
def web(open_browser: Callable[..., Watched], stack: Any) -> Watched:
    return open_browser(stack.api_url)


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def snap(screenshots: Path) -> Callable[["Page", str], Path]:
    def take(page: "Page", name: str) -> Path:
        path = screenshots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
        if os.environ.get("SETTLED_UPDATE_SCREENSHOTS") == "1":
            DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_SCREENSHOTS / path.name)
        return path

    return take


def event(api: httpx.Client, conversation: str, type_: str, channel: str, reason: str | None = None) -> None:
    response = api.post(
        f"/v1/conversations/{conversation}/events", json={"type": type_, "channel": channel, "reason": reason}
    )
    assert response.status_code == 202, response.text


def handoff(api: httpx.Client, conversation: str) -> dict[str, Any]:
    response = api.get(f"/v1/conversations/{conversation}/handoff")
    assert response.status_code == 200, response.text
    return response.json()


def drop_call(api: httpx.Client, conversation: str) -> None:
    """A call that was open and dropped mid-task."""
    event(api, conversation, "channel_opened", "voice")
    event(api, conversation, "interrupted", "voice")
    event(api, conversation, "channel_closed", "voice", "dropped")


def only_record(sandbox: Sandbox, operation_key: str) -> dict[str, Any]:
    records = sandbox.records(operation_key)
    assert len(records) == 1, records
    return records[0]


@pytest.fixture
def conversation() -> str:
    return new_id("conv")
