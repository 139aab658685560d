"""Record the golden histories: `python -m tests.golden.record` (or `make golden`).

Starts a real stack, runs each scenario to its verified outcome, and writes each workflow's history
as JSON beside this file.
"""

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
from temporalio.client import Client

from settled.identity import action_workflow_id, conversation_workflow_id
from settled.stack import Stack
from tests.helpers import BOOKING, REFUND, Sandbox, create, start_stack, wait_state

HERE = Path(__file__).parent
CONVERSATION = "golden-conversation"


def normal(api: httpx.Client, _: Sandbox) -> str:
    op = create(
        api, "room_booking", BOOKING, operation_id="golden-normal", conversation_id=CONVERSATION
    ).json()
    api.post(f"/v1/actions/{op['operation_id']}/authorize", json={"by": "caller"}, params={"wait": 10})
    api.post(
        "/v1/actions/golden-normal/presented",
        json={"channel": "voice", "text": "Room Ada…", "completed": False},
    )
    return "golden-normal"


def response_lost(api: httpx.Client, sandbox: Sandbox) -> str:
    sandbox.fault("bookings", "create", "drop_after_apply", "golden-lost")
    create(
        api,
        "room_booking",
        BOOKING,
        operation_id="golden-lost",
        conversation_id=CONVERSATION,
        authorized=True,
    )
    wait_state(api, "golden-lost", "confirmed")
    return "golden-lost"


def not_applied(api: httpx.Client, sandbox: Sandbox) -> str:
    sandbox.fault("refunds", "create", "fail_before_apply", "golden-resend", status=503)
    create(api, "refund", REFUND, operation_id="golden-resend", conversation_id=CONVERSATION, authorized=True)
    wait_state(api, "golden-resend", "confirmed")
    return "golden-resend"


def cancel_in_flight(api: httpx.Client, sandbox: Sandbox) -> str:
    hold = sandbox.fault("bookings", "create", "hold", "golden-cancel", apply=True)
    create(
        api,
        "room_booking",
        BOOKING,
        operation_id="golden-cancel",
        conversation_id=CONVERSATION,
        authorized=True,
    )
    sandbox.wait_held("golden-cancel")
    api.post("/v1/actions/golden-cancel/cancel", json={"by": "caller"})
    sandbox.release(hold)
    wait_state(api, "golden-cancel", "cancelled")
    return "golden-cancel"


def amended(api: httpx.Client, _: Sandbox) -> str:
    create(api, "room_booking", BOOKING, operation_id="golden-amend", conversation_id=CONVERSATION)
    api.post("/v1/actions/golden-amend/amend", json={"params": {"room": "Ada", "day": "Friday"}})
    api.post("/v1/actions/golden-amend/authorize", params={"wait": 10})
    return "golden-amend"


SCENARIOS: list[Callable[[httpx.Client, Sandbox], str]] = [
    normal,
    response_lost,
    not_applied,
    cancel_in_flight,
    amended,
]


async def export(stack: Stack, workflow_ids: list[str]) -> None:
    client = await Client.connect(stack.temporal_address)
    for workflow_id in workflow_ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        name = workflow_id.split(":", 1)[1]
        (HERE / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"wrote {name}.json ({len(history.events)} events)")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        stack = start_stack(Path(folder))
        try:
            with (
                httpx.Client(base_url=stack.api_url, timeout=30) as api,
                httpx.Client(base_url=stack.sandbox_url) as sb,
            ):
                ops = [scenario(api, Sandbox(sb)) for scenario in SCENARIOS]
                api.post(
                    f"/v1/conversations/{CONVERSATION}/events",
                    json={"type": "channel_closed", "channel": "voice", "reason": "dropped"},
                )
                api.post(
                    f"/v1/conversations/{CONVERSATION}/events",
                    json={"type": "channel_opened", "channel": "text"},
                )
            ids = [action_workflow_id(None, op) for op in ops] + [
                conversation_workflow_id(None, CONVERSATION)
            ]
            asyncio.run(export(stack, ids))
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
