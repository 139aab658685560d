"""Fixtures: one real stack per test session (Temporal dev server, worker, API, sandbox)."""

import os
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox
from tests.helpers import TEST_KINDS, Sandbox, api_client, sandbox_of


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("stack")
    with Stack.on_free_ports(data_dir, TEST_KINDS, ui=False).running() as running:
        yield running
    if os.environ.get("SETTLED_KEEP_LOGS"):
        print(f"stack logs in {data_dir / 'logs'}")


@pytest.fixture(scope="session")
def api(stack: Stack) -> Iterator[httpx.Client]:
    with api_client(stack) as client:
        yield client


@pytest.fixture(scope="session")
def sandbox(stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(stack) as truth:
        yield truth


@pytest.fixture(autouse=True)
def _clear_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "sandbox" in request.fixturenames:
        request.getfixturevalue("sandbox").clear_faults()


@pytest.fixture
async def truth(stack: Stack) -> AsyncIterator[AsyncSandbox]:
    """The sandbox's ground truth for async tests (client, adapters); faults cleared after each."""
    sandbox = AsyncSandbox(stack.sandbox_url)
    yield sandbox
    await sandbox.clear_faults()
    await sandbox.aclose()
