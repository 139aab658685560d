"""`settled sandbox` as a real process: it serves, stops cleanly on signals, and says when the
port is taken."""

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import free_port
from tests.sandbox.support import until

ROOT = Path(__file__).resolve().parents[2]


def start(port: int, db: Path) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "settled",
        "sandbox",
        "--sandbox-port",
        str(port),
        "--data-dir",
        str(db.parent),
    ]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture
def process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    child = start(port, tmp_path / "nested" / "sandbox.sqlite3")
    url = f"http://127.0.0.1:{port}"
    try:
        until(
            lambda: child.poll() is not None or answers(f"{url}/_sandbox/faults"), 60, "the sandbox process"
        )
        assert child.poll() is None, child.communicate()
        yield child, url
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def test_drops_cut_the_connection_without_a_logged_traceback(
    process: tuple[subprocess.Popen[str], str],
) -> None:
    child, url = process
    body = {"service": "bookings", "op": "create", "mode": "drop_after_apply"}
    assert httpx.post(f"{url}/_sandbox/faults", json=body).status_code == 201

    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(
            f"{url}/bookings", json={"room": "Ada", "day": "Thursday"}, headers={"Idempotency-Key": "k"}
        )

    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=10)
    assert "Traceback" not in stderr
    assert "ConnectionDropped" not in stderr


def test_stopping_answers_held_requests_instead_of_waiting(
    process: tuple[subprocess.Popen[str], str],
) -> None:
    child, url = process
    body = {"service": "bookings", "op": "create", "mode": "hold"}
    assert httpx.post(f"{url}/_sandbox/faults", json=body).status_code == 201
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(
            httpx.post,
            f"{url}/bookings",
            json={"room": "Ada", "day": "Thursday"},
            headers={"Idempotency-Key": "k"},
        )

        def is_held() -> bool:
            rows = httpx.get(f"{url}/_sandbox/requests").json()["requests"]
            return any(row["outcome"] == "held" for row in rows)

        until(is_held, what="the request to be held")
        child.send_signal(signal.SIGTERM)
        assert held.result(10).status_code == 503

    _, stderr = child.communicate(timeout=10)
    assert child.returncode == 0
    assert "graceful shutdown exceeded" not in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_and_exits_cleanly_on_a_signal(
    process: tuple[subprocess.Popen[str], str], sig: signal.Signals
) -> None:
    child, url = process
    created = httpx.post(
        f"{url}/bookings", json={"room": "Ada", "day": "Thursday"}, headers={"Idempotency-Key": "k"}
    )
    assert created.status_code == 201

    child.send_signal(sig)
    _, stderr = child.communicate(timeout=10)

    assert child.returncode == 0
    assert "Traceback" not in stderr


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        child = start(port, tmp_path / "sandbox.sqlite3")
        _, stderr = child.communicate(timeout=60)

    assert child.returncode != 0
    assert f"port {port}" in stderr
    assert "already in use" in stderr
    assert "Traceback" not in stderr
