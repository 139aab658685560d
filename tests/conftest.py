"""Fixtures: one real stack per test session (Temporal dev server, worker, API, sandbox)."""

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from settled.stack import Ports, Stack
from tests.helpers import Sandbox

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("stack")
    ports = Ports.free()
    kinds = data_dir / "kinds.toml"
    kinds.write_text(
        (HERE / "kinds.toml").read_text().replace("@SANDBOX_URL@", f"http://127.0.0.1:{ports.sandbox}")
    )
    running = Stack(data_dir, ports, config=kinds, ui=False).start()
    yield running
    running.stop()
    if os.environ.get("SETTLED_KEEP_LOGS"):
        print(f"stack logs in {data_dir / 'logs'}")


@pytest.fixture(scope="session")
def api(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.api_url, timeout=40) as client:
        yield client


@pytest.fixture(scope="session")
def sandbox(stack: Stack) -> Iterator[Sandbox]:
    with httpx.Client(base_url=stack.sandbox_url, timeout=10) as client:
        yield Sandbox(client)


@pytest.fixture(autouse=True)
def _clear_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "sandbox" in request.fixturenames:
        request.getfixturevalue("sandbox").clear_faults()
