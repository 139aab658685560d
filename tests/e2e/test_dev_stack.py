"""`settled dev`: starts every part, says where each listens, and stops all of them on SIGTERM."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import Ports
from tests.helpers import wait_for


def _dev(data_dir: Path, ports: Ports, **env: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable, "-m", "settled", "dev", "--data-dir", str(data_dir),
        "--api-port", str(ports.api), "--temporal-port", str(ports.temporal),
        "--ui-port", str(ports.ui), "--sandbox-port", str(ports.sandbox),
        "--worker-metrics-port", str(ports.worker_metrics),
    ]  # fmt: skip
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}
    )


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


@pytest.mark.parametrize(
    ("part", "what", "flag"),
    [("api", "API", "--api-port"), ("worker_metrics", "worker metrics", "--worker-metrics-port")],
)
def test_dev_refuses_a_taken_port_with_a_clear_error_before_starting_anything(
    tmp_path: Path, part: str, what: str, flag: str
) -> None:
    """A second `settled dev` beside another: every port it binds has a flag and is checked first."""
    ports = Ports.free()
    taken = getattr(ports, part)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        dev = _dev(tmp_path / "data", ports)
        output, _ = dev.communicate(timeout=60)
    assert dev.returncode == 1
    assert f"port {taken} ({what}) is already in use" in output and flag in output
    assert not _listening(ports.temporal)


def test_sigterm_while_the_stack_starts_stops_it_at_once(tmp_path: Path) -> None:
    ports = Ports.free()
    dev = _dev(tmp_path / "data", ports)
    try:
        # The dev server is being started (its log exists): the stack is mid-start.
        wait_for(lambda: (tmp_path / "data" / "logs" / "temporal.log").exists(), 60, "the dev server's start")
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(60) == 0
        assert dev.stdout is not None and "stopped while starting" in dev.stdout.read()
        wait_for(lambda: not _listening(ports.temporal), 60, "the dev server stopped")
        # Nothing it started is left behind: no process names its data dir (the dev server's database).
        wait_for(lambda: not _processes_naming(tmp_path / "data"), 30, "every part it started gone")
    finally:
        if dev.poll() is None:
            dev.kill()


def _processes_naming(path: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:  # it ended while being read
            continue
    return found


def test_a_part_that_dies_at_start_is_named_with_its_own_last_line(tmp_path: Path) -> None:
    """Not "not ready after 60s": the part's own reason, as soon as it exits."""
    ports = Ports.free()
    started = time.monotonic()
    dev = _dev(tmp_path / "data", ports, SETTLED_NAMESPACE="nowhere")
    try:
        output, _ = dev.communicate(timeout=90)
    finally:
        if dev.poll() is None:
            dev.kill()
    assert dev.returncode == 1, output
    assert "exited with code 2" in output and "namespace 'nowhere' does not exist" in output, output
    assert "temporal operator namespace create --namespace nowhere" in output
    assert time.monotonic() - started < 55  # well before the API's 60 s start-up deadline
    assert "Traceback" not in output
