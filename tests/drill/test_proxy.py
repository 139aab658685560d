"""The fault proxy in front of a real service (the sandbox): what the client sees, and what the
service's own records say happened."""

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from settled.drill.proxy import FaultProxy, running

from settled.runtime.stack import Stack
from tests.helpers import Sandbox, new_id

BOOKING = {"room": "Ada", "day": "Thursday"}


@pytest.fixture
async def proxy(stack: Stack) -> AsyncIterator[FaultProxy]:
    async with running(stack.sandbox_url) as started:
        yield started


@pytest.fixture
async def client(proxy: FaultProxy) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=proxy.url, timeout=10) as http:
        yield http


async def book(client: httpx.AsyncClient, key: str) -> httpx.Response:
    return await client.post("/bookings", json=BOOKING, headers={"Idempotency-Key": key})


async def test_it_forwards_requests_and_answers_as_the_service_did(
    proxy: FaultProxy, client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    key = new_id()
    response = await book(client, key)
    assert response.status_code == 201
    record = sandbox.records(key)
    assert [r["id"] for r in record] == [response.json()["id"]]
    assert (await client.get(f"/bookings/by-key/{key}")).json()["id"] == record[0]["id"]
    exchange = proxy.involving(key)[0]
    assert (exchange.forwarded, exchange.upstream_status, exchange.outcome) == (True, 201, "forwarded")


async def test_it_delays_a_matching_request_then_forwards_it(
    proxy: FaultProxy, client: httpx.AsyncClient
) -> None:
    key = new_id()
    proxy.add_fault("delay", match=key, delay_s=0.3)
    started = time.monotonic()
    assert (await book(client, key)).status_code == 201
    assert time.monotonic() - started >= 0.3
    assert (await book(client, new_id())).status_code == 201  # others pass untouched


async def test_a_dropped_response_breaks_the_connection_though_the_service_applied_it(
    proxy: FaultProxy, client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    key = new_id()
    proxy.add_fault("drop_after_forward", method="POST", path="^/bookings$", match=key)
    with pytest.raises(httpx.RemoteProtocolError):
        await book(client, key)
    assert len(sandbox.records(key)) == 1
    exchange = proxy.involving(key)[0]
    assert (exchange.forwarded, exchange.upstream_status, exchange.outcome) == (True, 201, "dropped")
    assert (await book(client, key)).status_code == 201  # count=1: the retry gets the service's replay


async def test_a_refused_request_breaks_the_connection_and_never_reaches_the_service(
    proxy: FaultProxy, client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    key = new_id()
    proxy.add_fault("refuse", match=key)
    with pytest.raises(httpx.RemoteProtocolError):
        await book(client, key)
    assert sandbox.records(key) == [] and sandbox.requests(key) == []
    assert proxy.involving(key)[0].forwarded is False


async def test_unavailable_answers_503_before_forwarding(
    proxy: FaultProxy, client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    key = new_id()
    proxy.add_fault("unavailable", match=key, count=2)
    assert [(await book(client, key)).status_code for _ in range(3)] == [503, 503, 201]
    assert len(sandbox.writes(key)) == 1


@pytest.mark.parametrize("apply", [False, True])
async def test_a_held_request_waits_for_its_release_then_is_forwarded_or_refused(
    proxy: FaultProxy, client: httpx.AsyncClient, sandbox: Sandbox, apply: bool
) -> None:
    key = new_id()
    fault = proxy.add_fault("hold", match=key, apply=apply)
    pending = asyncio.create_task(book(client, key))
    deadline = time.monotonic() + 5
    while not any(e.held for e in proxy.involving(key)):
        assert time.monotonic() < deadline, "the request was never held"
        await asyncio.sleep(0.01)
    assert not pending.done() and sandbox.requests(key) == []
    proxy.release(fault.id)
    response = await asyncio.wait_for(pending, 5)
    assert response.status_code == (201 if apply else 503)
    assert len(sandbox.records(key)) == (1 if apply else 0)
