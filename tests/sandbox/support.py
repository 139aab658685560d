"""Running the sandbox for a test: a real uvicorn server in a background thread, on its own port."""

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from settled.sandbox.app import create_app
from settled.sandbox.server import listen, make_server

from tests.helpers import wait_for

T = TypeVar("T")


def until(probe: Callable[[], T | None], timeout_s: float = 5.0, what: str = "condition") -> T:
    return wait_for(probe, timeout_s, what)


class ThreadedSandbox:
    def __init__(self, db_path: Path) -> None:
        self._sock = listen("127.0.0.1", 0)
        port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._server = make_server(create_app(db_path))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=f"sandbox-{port}", daemon=True
        )

    def start(self) -> "ThreadedSandbox":
        self._thread.start()
        until(lambda: self._server.started, 10, "the sandbox server to start")
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
        assert not self._thread.is_alive(), "the sandbox server did not stop"


@contextmanager
def running(db_path: Path) -> Iterator[ThreadedSandbox]:
    server = ThreadedSandbox(db_path).start()
    try:
        yield server
    finally:
        server.stop()


class Background:
    """Send requests that will block (held, hung) from another thread, and collect them later."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=8)

    def send(self, client: httpx.Client, method: str, url: str, **kwargs: Any) -> "Future[httpx.Response]":
        return self._pool.submit(client.request, method, url, **kwargs)

    def submit(self, work: Callable[[], T]) -> "Future[T]":
        return self._pool.submit(work)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def requests(client: httpx.Client, **params: str) -> list[dict[str, Any]]:
    return client.get("/_sandbox/requests", params=params).json()["requests"]


def records(client: httpx.Client, **params: str) -> list[dict[str, Any]]:
    return client.get("/_sandbox/records", params=params).json()["records"]


def fault(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/_sandbox/faults", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def wait_outcome(client: httpx.Client, key: str, outcome: str, op: str = "create") -> dict[str, Any]:
    """Wait until a request for `key` is in flight with this progress note (e.g. "held")."""

    def probe() -> dict[str, Any] | None:
        rows = requests(client, key=key, op=op)
        return next((r for r in rows if r["state"] == "in_flight" and r["outcome"] == outcome), None)

    return until(probe, what=f"a {op} request for {key} to be {outcome}")
