"""`settled dev`: starts every part, says where each listens, and stops all of them on SIGTERM."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from settled.runtime.stack import Ports, free_port
from tests.helpers import wait_for


def _dev(data_dir: Path, ports: Ports) -> subprocess.Popen[str]:
    argv = [
        sys.executable, "-m", "settled", "dev", "--data-dir", str(data_dir),
        "--api-port", str(ports.api), "--temporal-port", str(ports.temporal),
        "--ui-port", str(ports.ui), "--sandbox-port", str(ports.sandbox),
    ]  # fmt: skip
    env = {**os.environ, "SETTLED_WORKER_METRICS_PORT": str(free_port())}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_dev_starts_everything_and_stops_it_on_sigterm(tmp_path: Path) -> None:
    ports = Ports.free()
    dev = _dev(tmp_path / "data", ports)
    try:
        assert dev.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any("logs" in line for line in lines):
            lines.append(dev.stdout.readline())
        banner = "".join(lines)
        assert "settled dev is up" in banner, banner
        for port in (ports.api, ports.temporal, ports.ui, ports.sandbox):
            assert f":{port}" in banner
        assert httpx.get(f"http://127.0.0.1:{ports.api}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{ports.ui}/", timeout=10).status_code == 200
        assert (tmp_path / "data" / "temporal.sqlite").exists()
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(60) == 0
        assert "settled dev stopped" in dev.stdout.read()
        wait_for(
            lambda: not any(_listening(p) for p in (ports.api, ports.temporal, ports.sandbox)),
            10,
            "ports freed",
        )
    finally:
        if dev.poll() is None:
            dev.kill()


def test_dev_refuses_a_taken_port_with_a_clear_error(tmp_path: Path) -> None:
    ports = Ports.free()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports.api))
        holder.listen()
        dev = _dev(tmp_path / "data", ports)
        output, _ = dev.communicate(timeout=60)
    assert dev.returncode == 1
    assert f"port {ports.api} (API) is already in use" in output and "--api-port" in output
