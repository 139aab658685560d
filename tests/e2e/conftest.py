"""A stack of a module's own for the crash and outage tests, which kill its parts: the session's stack
stays untouched. Module-scoped, so each module that asks gets its own."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from settled.stack import Stack
from tests.helpers import KINDS, Sandbox, api_client, sandbox_of

# How long a killed part's work may take to be picked up and settled by whoever takes over.
TAKEOVER_S = 60.0


def long_timeout_stack(data_dir: Path) -> Stack:
    """The test kinds with a 20 s dispatch timeout: a worker must still be waiting on a held request
    when the test kills it (or the service), not have given up on its own after a second."""
    kinds = KINDS.read_text().replace("timeout_s = 1.0", "timeout_s = 20.0")
    return Stack.on_free_ports(data_dir, kinds, ui=False).start()


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = long_timeout_stack(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def module_api(module_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(module_stack) as client:
        yield client


@pytest.fixture(scope="module")
def module_sandbox(module_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(module_stack) as truth:
        yield truth
