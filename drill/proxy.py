"""A fault-injecting reverse proxy on loopback: put between settled and a service you own, it injects
the same faults the sandbox can (delay; drop the response after forwarding; refuse before
forwarding; 503 before forwarding; hold until released) without touching the service.

It is an ASGI app served by uvicorn in the caller's event loop, forwarding with httpx. Every
request is kept in `exchanges`, with what the service answered, so a drill can tell what reached
the service even when the client was told nothing.
"""

import asyncio
import itertools
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import httpx
import uvicorn
from settled.drill.timeline import now

ProxyMode = Literal["delay", "drop_after_forward", "refuse", "unavailable", "hold"]
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers"}
    | {"transfer-encoding", "upgrade", "host", "content-length", "content-encoding"}
)
START_TIMEOUT_S = 10.0
UPSTREAM_TIMEOUT_S = 30.0


class ConnectionCut(Exception):
    """Raised after the response has started, so that uvicorn closes the connection mid-answer."""


class _QuietCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ConnectionCut))


_QUIET = _QuietCuts()


@dataclass
class ProxyFault:
    id: str
    mode: ProxyMode
    method: str | None = None
    path: str | None = None  # a regular expression the request path must match (search)
    match: str | None = None  # must appear in the path, a header value or the body
    count: int = 1  # 0: every matching request
    delay_s: float = 1.0
    apply: bool = True  # hold: forward when released (True), or answer 503 without forwarding
    fired: int = 0
    retired: bool = False
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    def catches(self, exchange: "Exchange") -> bool:
        if self.retired or (self.count and self.fired >= self.count):
            return False
        if self.method is not None and exchange.method != self.method.upper():
            return False
        if self.path is not None and re.search(self.path, exchange.path) is None:
            return False
        return self.match is None or exchange.involves(self.match)


@dataclass
class Exchange:
    seq: int
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: str
    received_at: datetime
    fault: str | None = None
    state: Literal["in_flight", "done"] = "in_flight"
    held: bool = False
    forwarded: bool = False  # the request was sent on to the service
    upstream_status: int | None = None
    upstream_body: str | None = None
    upstream_at: datetime | None = None  # when the service's answer arrived
    outcome: str | None = None
    finished_at: datetime | None = None

    def involves(self, text: str) -> bool:
        return text in self.path or text in self.query or text in self.body or text in self.headers.values()


class _Server(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The drill owns Ctrl-C; a proxy inside it must not swallow the signal.
        yield


class FaultProxy:
    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.host = host
        self.port = port
        self.exchanges: list[Exchange] = []
        self._faults: dict[str, ProxyFault] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- faults ----------------------------------------------------------------------------------

    def add_fault(self, mode: ProxyMode, **options: Any) -> ProxyFault:
        fault = ProxyFault(id=f"p-{next(self._ids)}", mode=mode, **options)
        self._faults[fault.id] = fault
        return fault

    def release(self, fault_id: str) -> None:
        """Let held requests go on (forwarded or not, per the fault's `apply`); it fires no more."""
        fault = self._faults[fault_id]
        fault.retired = True
        fault.gate.set()

    def retire(self, fault_id: str) -> None:
        self.release(fault_id)

    def involving(self, text: str) -> list[Exchange]:
        return [exchange for exchange in self.exchanges if exchange.involves(text)]

    def _take(self, exchange: Exchange) -> ProxyFault | None:
        for fault in self._faults.values():
            if fault.catches(exchange):
                fault.fired += 1
                return fault
        return None

    # -- serving ---------------------------------------------------------------------------------

    async def start(self) -> "FaultProxy":
        logging.getLogger("uvicorn.error").addFilter(_QUIET)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._client = httpx.AsyncClient(base_url=self.upstream, timeout=UPSTREAM_TIMEOUT_S)
        config = uvicorn.Config(
            self,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if self._task.done() or time.monotonic() > deadline:
                raise RuntimeError(f"the fault proxy for {self.upstream} did not start")
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        for fault in self._faults.values():
            fault.apply = False  # held requests give up without reaching the service
            fault.gate.set()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.wait_for(self._task, START_TIMEOUT_S)
        if self._client is not None:
            await self._client.aclose()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        exchange = Exchange(
            seq=next(self._seq),
            method=scope["method"],
            path=scope["path"],
            query=scope.get("query_string", b"").decode("latin-1"),
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            body=body.decode("utf-8", "replace"),
            received_at=now(),
        )
        self.exchanges.append(exchange)
        try:
            await self._handle(exchange, body, send)
        finally:
            exchange.state = "done"
            exchange.finished_at = now()

    async def _handle(self, exchange: Exchange, body: bytes, send: Any) -> None:
        fault = self._take(exchange)
        mode = fault.mode if fault else None
        exchange.fault = fault.id if fault else None
        if fault is not None and mode == "refuse":
            exchange.outcome = "refused"
            await _cut(send, 502)
        if fault is not None and mode == "unavailable":
            exchange.outcome = "unavailable"
            await _reply(send, 503, {"error": {"code": "unavailable", "message": f"injected by {fault.id}"}})
            return
        if fault is not None and mode == "delay":
            await asyncio.sleep(fault.delay_s)
        if fault is not None and mode == "hold":
            exchange.held = True
            await fault.gate.wait()
            exchange.held = False
            if not fault.apply:
                exchange.outcome = "released_unforwarded"
                await _reply(
                    send, 503, {"error": {"code": "unavailable", "message": f"released by {fault.id}"}}
                )
                return
        try:
            upstream = await self._forward(exchange, body)
        except httpx.HTTPError as error:
            exchange.outcome = f"upstream_error: {type(error).__name__}"
            await _reply(send, 502, {"error": {"code": "bad_gateway", "message": str(error)[:200]}})
            return
        if mode == "drop_after_forward":
            exchange.outcome = "dropped"
            await _cut(send, upstream.status_code)
        exchange.outcome = "forwarded"
        headers = [(k, v) for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP]
        await _send(send, upstream.status_code, headers, upstream.content)

    async def _forward(self, exchange: Exchange, body: bytes) -> httpx.Response:
        assert self._client is not None
        headers = {k: v for k, v in exchange.headers.items() if k not in HOP_BY_HOP}
        url = exchange.path + (f"?{exchange.query}" if exchange.query else "")
        exchange.forwarded = True
        response = await self._client.request(exchange.method, url, headers=headers, content=body)
        exchange.upstream_at = now()
        exchange.upstream_status = response.status_code
        exchange.upstream_body = response.text
        return response


async def _send(send: Any, status: int, headers: list[tuple[str, str]], content: bytes) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    raw.append((b"content-length", str(len(content)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": content})


async def _reply(send: Any, status: int, body: dict[str, Any]) -> None:
    await _send(send, status, [("content-type", "application/json")], json.dumps(body).encode())


async def _cut(send: Any, status: int) -> None:
    """Start an answer that promises a body, then break the connection: the client sees it fail."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"64")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    raise ConnectionCut("connection cut by the fault proxy")


@asynccontextmanager
async def running(upstream: str) -> AsyncIterator[FaultProxy]:
    proxy = await FaultProxy(upstream).start()
    try:
        yield proxy
    finally:
        await proxy.stop()
