"""Async helpers for client and adapter tests: the sandbox's ground truth over real HTTP, waiting on
conditions with a deadline, and a TCP proxy that loses answers (a network fault, not a mock)."""

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
from settled.bench.actions import Billed, billed_in_history
from temporalio.client import Client, WorkflowExecutionStatus

from settled.client import SettledClient

T = TypeVar("T")


async def closed_run_billed(temporal_address: str, workflow_id: str, timeout_s: float = 45.0) -> Billed:
    """Wait until the workflow's latest run has closed, then count the Actions of its every run from
    their histories, as the bench counts them."""
    client = await Client.connect(temporal_address)
    handle = client.get_workflow_handle(workflow_id)

    async def closed() -> bool:
        return (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED

    await eventually(closed, timeout_s=timeout_s, what=f"{workflow_id}'s run to close")
    return await billed_in_history(client, workflow_id)


async def billed(temporal_address: str, workflow_id: str) -> Billed:
    """The Actions of the workflow's every run so far, from their histories."""
    return await billed_in_history(await Client.connect(temporal_address), workflow_id)


def new_id(prefix: str = "op") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def eventually(
    probe: Callable[[], Awaitable[T | None]], timeout_s: float = 20.0, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something truthy; fail with the last value at the deadline."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last: {last!r}")


class AsyncSandbox:
    """The sandbox business services' records and fault controls, without blocking the event loop
    (a framework's tool runs on the same loop as the test)."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=10)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def refunds_for(self, order_id: str) -> list[dict[str, Any]]:
        rows = (await self.http.get("/_sandbox/records", params={"service": "refunds"})).json()["records"]
        return [row for row in rows if row["payload"].get("order_id") == order_id]

    async def records(self, key: str) -> list[dict[str, Any]]:
        rows = (await self.http.get("/_sandbox/records")).json()["records"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]

    async def writes(self, key: str) -> list[dict[str, Any]]:
        rows = (await self.http.get("/_sandbox/requests", params={"op": "create"})).json()["requests"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]

    async def requests(self, key: str, op: str) -> list[dict[str, Any]]:
        """Requests of one kind (`create`, `lookup`, `cancel`) that reached the service for this key."""
        response = await self.http.get("/_sandbox/requests", params={"op": op, "key": key})
        return list(response.json()["requests"])

    async def fault(self, service: str, op: str, mode: str, key: str, **extra: Any) -> str:
        body = {"service": service, "op": op, "mode": mode, "match_key": key, **extra}
        response = await self.http.post("/_sandbox/faults", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def release(self, fault_id: str) -> None:
        assert (await self.http.post(f"/_sandbox/faults/{fault_id}/release")).status_code == 200

    async def wait_held(self, key: str) -> None:
        async def held() -> bool:
            return any(r["state"] == "in_flight" and r["outcome"] == "held" for r in await self.writes(key))

        await eventually(held, what=f"a held write for {key}")

    async def wait_in_flight(self, key: str) -> None:
        """A write for `key` has reached the service and is not answered yet (held or hanging)."""

        async def arrived() -> bool:
            return any(r["state"] == "in_flight" for r in await self.writes(key))

        await eventually(arrived, what=f"a write in flight for {key}")

    async def wait_in_flight_cancel(self, key: str) -> None:
        async def arrived() -> bool:
            rows = (await self.http.get("/_sandbox/requests", params={"op": "cancel"})).json()["requests"]
            return any(
                r["state"] == "in_flight" and key in (r.get("key"), r.get("client_reference")) for r in rows
            )

        await eventually(arrived, what=f"a reversal in flight for {key}")

    async def clear_faults(self) -> None:
        await self.http.delete("/_sandbox/faults")


class RecordingClient(SettledClient):
    """The real client, noting which channel events an adapter sent (each still goes to the API)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, str | None]] = []

    async def conversation_event(  # type: ignore[override]
        self, conversation_id: str, type: Any, channel: Any, reason: str | None = None
    ) -> dict[str, Any]:
        self.events.append((type, reason))
        return await super().conversation_event(conversation_id, type, channel, reason)


class LosingProxy:
    """A TCP proxy in front of the API that loses the first `lose` answers: it forwards the request,
    lets the API act on it, and closes the connection before the answer (a response lost in transit).
    """

    def __init__(self, target_port: int, lose: int = 1) -> None:
        self.target_port = target_port
        self.lose = lose
        self.requests = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        try:
            request = await _read_http_message(reader)
            if not request:
                return
            self.requests += 1
            upstream_writer.write(request)
            await upstream_writer.drain()
            answer = await _read_http_message(upstream_reader)
            if self.requests <= self.lose:
                return  # the API did the work; the caller never hears of it
            writer.write(answer)
            await writer.drain()
        finally:
            upstream_writer.close()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["LosingProxy"]:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        try:
            yield self
        finally:
            self._server.close()
            await self._server.wait_closed()


async def _read_http_message(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 message with a Content-Length body (what httpx and uvicorn send here)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return head + body


# What an agent may say while a lost answer is being checked: still sending, or sent and being
# checked (which one depends on how fast the service's silence turns into `unknown`).
NOT_YET = (
    "I'm sending the request to refund the order now; it isn't confirmed yet.",
    "The request to refund the order was sent, but I haven't confirmed the result. "
    "I'm checking it before trying again.",
)
REFUND = {"order_id": "o-1001", "amount": 25.5, "currency": "EUR"}


def refund(order_id: str | None = None) -> dict[str, Any]:
    return {**REFUND, "order_id": order_id or new_id("order")}
