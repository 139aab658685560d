"""Fixtures for the adapter tests: the session's real stack, an async client, the sandbox's truth,
and the stack's own kinds file as tools."""

from collections.abc import AsyncIterator

import pytest

from adapters.common import ActionKind, load_action_kinds
from settled.stack import Stack
from tests.client.support import RecordingClient


@pytest.fixture
async def settled(stack: Stack) -> AsyncIterator[RecordingClient]:
    async with RecordingClient(stack.api_url, timeout_s=20) as client:
        yield client


@pytest.fixture(scope="session")
def refund_kind(stack: Stack) -> ActionKind:
    """`refund` as the stack's worker knows it (the service deduplicates on Idempotency-Key)."""
    return load_action_kinds(stack.config, names=["refund"])[0]
