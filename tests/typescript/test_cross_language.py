"""The same request from a TypeScript agent and a Python agent in the same conversation meets one
action: the operation id is the same in both languages, however each writes the params (`12` or
`12.0`, keys in any order, text composed or decomposed). The sandbox's records judge: one write."""

import json
import subprocess
from pathlib import Path

import pytest
from settled.adapters.common import SettledChannel, load_action_kinds

from settled.client import SettledClient
from settled.runtime.stack import Stack
from tests.client.support import AsyncSandbox, new_id
from tests.typescript.conftest import PACKAGE


def ask_from_typescript(stack: Stack, conversation: str, arguments: str) -> str:
    script = PACKAGE / "build" / "test" / "ask-once.js"
    run = subprocess.run(
        ["node", str(script), stack.api_url, conversation, "refund", arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.strip()


@pytest.mark.parametrize(
    "typescript_first", [False, True], ids=["python-then-typescript", "typescript-then-python"]
)
async def test_one_request_from_two_languages_is_one_action(
    built: Path,
    stack: Stack,
    truth: AsyncSandbox,
    typescript_first: bool,
) -> None:
    conversation = new_id("conv")
    order = f"Zu\u0308rich-{new_id('order')}"  # decomposed in Python, composed in TypeScript
    python_params = {"order_id": order, "amount": 12.0, "currency": "EUR"}
    composed = json.dumps(order.replace("u\u0308", "\u00fc"), ensure_ascii=False)
    typescript_arguments = f'{{"currency": "EUR", "amount": 12, "order_id": {composed}}}'
    async with SettledClient(stack.api_url, timeout_s=20) as client:
        kinds = load_action_kinds(stack.config, names=["refund"])
        channel = SettledChannel(client, conversation, kinds, authorize_on_call=True, wait_s=5)
        if typescript_first:
            spoken = ask_from_typescript(stack, conversation, typescript_arguments)
            status = await channel.request("refund", python_params)
        else:
            status = await channel.request("refund", python_params)
            spoken = ask_from_typescript(stack, conversation, typescript_arguments)
        assert status.operation_id in spoken, spoken
        assert spoken.startswith("CONFIRMED"), spoken
        handoff = await client.handoff(conversation)
    assert [action.operation_id for action in handoff.actions] == [status.operation_id]
    assert len(await truth.records(status.operation_id)) == 1
    assert len(await truth.writes(status.operation_id)) == 1
