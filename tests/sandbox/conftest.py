"""One sandbox server for the package (reset before each test), and a factory for private ones."""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from tests.sandbox.support import Background, ThreadedSandbox, running


@pytest.fixture(scope="session")
def shared_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSandbox]:
    with running(tmp_path_factory.mktemp("sandbox") / "sandbox.sqlite3") as server:
        yield server


@pytest.fixture
def client(shared_sandbox: ThreadedSandbox) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=shared_sandbox.url, timeout=5) as http:
        assert http.post("/_sandbox/reset").status_code == 200
        yield http
        http.delete("/_sandbox/faults")


@pytest.fixture
def background(client: httpx.Client) -> Iterator[Background]:
    pool = Background()
    yield pool
    # Free whatever a failed test left held, or the pool would wait for it.
    client.delete("/_sandbox/faults")
    pool.close()


@pytest.fixture
def private_sandbox() -> Callable[[Path], AbstractContextManager[ThreadedSandbox]]:
    """A server of one's own, on a given db file: for restarts."""
    return running
