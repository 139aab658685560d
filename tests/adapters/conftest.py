"""Fixtures for the adapter tests: the session's real stack, an async client, the sandbox's truth,
and the stack's own kinds file as tools."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from settled.adapters.common import ActionKind, load_action_kinds

from settled.domain.models import ActionStatus
from settled.runtime.stack import Stack
from tests.client.support import RecordingClient


class SentClient(RecordingClient):
    """The real client, noting in order what an adapter sent: channel events as (type, reason) and
    presentations as ("presented", "heard" | "cut"). Each still goes to the API."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str | None]] = []

    async def conversation_event(  # type: ignore[override]
        self, conversation_id: str, type: Any, channel: Any, reason: str | None = None
    ) -> dict[str, Any]:
        self.sent.append((type, reason))
        return await super().conversation_event(conversation_id, type, channel, reason)

    async def presented(  # type: ignore[override]
        self, operation_id: str, channel: Any, text: str, completed: bool, **kwargs: Any
    ) -> ActionStatus:
        self.sent.append(("presented", "heard" if completed else "cut"))
        return await super().presented(operation_id, channel, text, completed, **kwargs)


@pytest.fixture
async def settled(stack: Stack) -> AsyncIterator[SentClient]:
    async with SentClient(stack.api_url, timeout_s=20) as client:
        yield client


@pytest.fixture(scope="session")
def refund_kind(stack: Stack) -> ActionKind:
    """`refund` as the stack's worker knows it (the service deduplicates on Idempotency-Key)."""
    return load_action_kinds(stack.config, names=["refund"])[0]
