"""Fixtures for the client tests: an async client and the sandbox, over the session's real stack."""

from collections.abc import AsyncIterator

import pytest

from settled.client import SettledClient
from settled.runtime.stack import Stack


@pytest.fixture
async def settled(stack: Stack) -> AsyncIterator[SettledClient]:
    async with SettledClient(stack.api_url, timeout_s=20) as client:
        yield client
