"""deploy/temporal/setup.sh, the compose job that prepares a cluster for settled, run as compose runs it
(its environment taken from docker-compose.yml) with the real `temporal` CLI against a real Temporal
dev server: the namespace with its retention, settled's search attributes, twice without harm, and a
loud failure when an attribute already exists with another type."""

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from settled.runtime.stack import free_port, temporal_binary
from settled.temporal import visibility

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "deploy" / "temporal" / "setup.sh"
JOB_ENV = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["temporal-setup"][
    "environment"
]
NAMESPACE = "settled-compose-test"  # not the dev server's own `default`: the job must create it


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    port = free_port()
    argv = [
        str(temporal_binary()), "server", "start-dev", "--headless", "--log-level", "error",
        "--ip", "127.0.0.1", "--port", str(port), "--http-port", str(free_port()),
    ]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not listening(port):
            assert server.poll() is None and time.monotonic() < deadline, (
                "the Temporal dev server did not start"
            )
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(20)


def run_setup(address: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{temporal_binary().parent}{os.pathsep}{os.environ['PATH']}",
        "NAMESPACE_RETENTION": JOB_ENV["NAMESPACE_RETENTION"],
        "SEARCH_ATTRIBUTES": JOB_ENV["SEARCH_ATTRIBUTES"],
        "SETTLED_NAMESPACE": NAMESPACE,
        "TEMPORAL_ADDRESS": address,
        **overrides,
    }
    return subprocess.run(["sh", str(SETUP)], env=env, capture_output=True, text=True, timeout=240)


def hours(retention: str) -> int:
    assert retention.endswith("h"), retention
    return int(retention[:-1])


async def test_the_job_prepares_a_new_namespace_and_can_run_again(address: str) -> None:
    for run in ("first", "again"):
        result = run_setup(address)
        assert result.returncode == 0, f"{run} run: {result.stdout}{result.stderr}"

    client = await Client.connect(address, namespace=NAMESPACE)
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=NAMESPACE)
    )
    retention = described.config.workflow_execution_retention_ttl.ToSeconds()
    assert retention == hours(JOB_ENV["NAMESPACE_RETENTION"]) * 3600
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=NAMESPACE)
    )
    types = {
        name: IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_").title()
        for name, kind in listed.custom_attributes.items()
    }
    assert types == visibility.declared()


def test_an_attribute_of_another_type_fails_the_job_by_name(address: str) -> None:
    assert run_setup(address).returncode == 0
    result = run_setup(address, SEARCH_ATTRIBUTES=f"{visibility.KIND.name}=Bool")
    assert result.returncode != 0
    assert visibility.KIND.name in result.stderr and "different type" in result.stderr
