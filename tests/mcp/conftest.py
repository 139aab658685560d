"""The MCP tests' world: one stack of their own with API keys (two tenants) and a short MCP wait, and
/mcp reached three ways: over the network in each protocol revision, and in-process."""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from settled.api.app import create_app

from settled.runtime.config import Settings, parse_api_keys
from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox
from tests.e2e.conftest import LONG_TIMEOUT
from tests.mcp.support import ALLOWED_ORIGIN, KEYS, LEGACY, MODERN, WAIT_S, Endpoint

ENV = {
    "SETTLED_API_KEYS": KEYS,
    "SETTLED_MCP_WAIT_S": str(WAIT_S),
    "SETTLED_MCP_ALLOWED_ORIGINS": f"{ALLOWED_ORIGIN},http://127.0.0.1:6274",
}


@pytest.fixture(scope="session")
def keyed_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Like the e2e modules' own stacks (long dispatch timeouts: a held write is still awaited when the
    test releases it), with two tenants' keys."""
    stack = Stack.on_free_ports(tmp_path_factory.mktemp("mcp"), LONG_TIMEOUT.kinds, ui=False, extra_env=ENV)
    with stack.running():
        yield stack


@pytest.fixture
async def truth(keyed_stack: Stack) -> AsyncIterator[AsyncSandbox]:
    sandbox = AsyncSandbox(keyed_stack.sandbox_url)
    yield sandbox
    await sandbox.clear_faults()
    await sandbox.aclose()


def app_settings(stack: Stack) -> Settings:
    """The settings of the stack's API, for an app in the test's process (the stack's worker runs the
    work: this app hosts none)."""
    return Settings(
        temporal_address=stack.temporal_address,
        config_path=stack.config,
        api_keys=parse_api_keys(KEYS),
        sandbox_url=stack.sandbox_url,
        api_worker=False,
        mcp_wait_s=WAIT_S,
        mcp_allowed_origins=[ALLOWED_ORIGIN],
    )


@asynccontextmanager
async def in_process(settings: Settings) -> AsyncIterator[Endpoint]:
    """The API app in the test's process, spoken to over ASGI. ASGI hands over a response once it is
    complete, so only the 2026 revision works in-process: the 2025 one keeps a stream open for what
    the server asks."""
    app = create_app(settings)
    # The lifespan runs in a task of its own: the MCP session manager's task group must be left in
    # the task that entered it, and a fixture's teardown runs in another.
    running, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            running.set()
            await stop.wait()

    served = asyncio.ensure_future(serve())
    await asyncio.wait([served, asyncio.ensure_future(running.wait())], return_when=asyncio.FIRST_COMPLETED)
    assert running.is_set(), served.exception()
    try:
        yield Endpoint("http://settled.in-process/mcp", MODERN, httpx2.ASGITransport(app=app))
    finally:
        stop.set()
        await served


def networked_endpoint(stack: Stack, revision: str) -> Endpoint:
    return Endpoint(f"{stack.api_url}/mcp", LEGACY if revision == "2025" else MODERN)


@pytest.fixture(params=["in-process", "http-2025", "http-2026"])
async def endpoint(request: pytest.FixtureRequest, keyed_stack: Stack) -> AsyncIterator[Endpoint]:
    if request.param == "in-process":
        async with in_process(app_settings(keyed_stack)) as inside:
            yield inside
    else:
        yield networked_endpoint(keyed_stack, request.param.removeprefix("http-"))


@pytest.fixture(params=["http-2025", "http-2026"])
def networked(request: pytest.FixtureRequest, keyed_stack: Stack) -> Endpoint:
    """Over the network only: what needs a stream that stays open (subscriptions)."""
    return networked_endpoint(keyed_stack, request.param.removeprefix("http-"))
