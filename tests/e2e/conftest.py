"""A stack of a module's own for the crash, outage, restart, backlog and security tests, which kill its
parts or configure it apart: the session's stack stays untouched. Module-scoped, so each module that
asks gets its own; a module states how its stack differs in `STACK` (default: `LONG_TIMEOUT`)."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import httpx
import pytest

from settled.domain.kinds import Variant
from settled.runtime.stack import Stack
from tests.helpers import TEST_KINDS, Sandbox, api_client, sandbox_of

# How long a killed part's work may take to be picked up and settled by whoever takes over.
TAKEOVER_S = 60.0


@dataclass(frozen=True)
class StackOptions:
    kinds: Mapping[str, Variant] = field(default_factory=lambda: TEST_KINDS)
    env: Mapping[str, str] = field(default_factory=dict)
    ui: bool = False


# The test kinds with a 20 s dispatch timeout: a worker must still be waiting on a held request when
# the test kills it (or the service), not have given up on its own after a second.
LONG_TIMEOUT = StackOptions({name: kind.but(timeout_s=20.0) for name, kind in TEST_KINDS.items()})


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options: StackOptions = getattr(request.module, "STACK", LONG_TIMEOUT)
    data_dir = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    stack = Stack.on_free_ports(data_dir, options.kinds, ui=options.ui, extra_env=dict(options.env))
    with stack.running():
        yield stack


@pytest.fixture(scope="module")
def module_api(module_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(module_stack) as client:
        yield client


@pytest.fixture(scope="module")
def module_sandbox(module_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(module_stack) as truth:
        yield truth


@pytest.fixture
def slow_transfers(module_sandbox: Sandbox) -> Iterator[None]:
    """The module stack's transfers stay pending (accepted, not finished) until the test finishes them."""
    http = module_sandbox.http
    assert http.put("/_sandbox/transfers", json={"settle_after_s": 3600}).status_code == 200
    yield
    http.put("/_sandbox/transfers", json={})
