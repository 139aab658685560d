"""`settled api --host`: loopback by default, 0.0.0.0 in a container, and nothing but an IP address."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from settled.cli.main import main, parser

from settled.domain.kinds import sandbox_kinds_text
from settled.runtime.stack import StackError, ensure_free, free_port

PROC_TCP = Path("/proc/net/tcp")


def test_host_defaults_to_loopback() -> None:
    assert parser().parse_args(["api"]).host == "127.0.0.1"


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1", "::", "::1", "10.0.0.7"])
def test_host_accepts_ip_addresses(host: str) -> None:
    assert parser().parse_args(["api", "--host", host]).host == host


@pytest.mark.parametrize("host", ["localhost", "example.com", "0.0.0.0:8000", "", "256.1.1.1"])
def test_host_refuses_anything_else_before_starting(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["api", "--host", host])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--host" in error and "is not an IP address" in error


def test_an_address_not_on_this_machine_is_named() -> None:
    # 192.0.2.0/24 is reserved for documentation (RFC 5737): never an address of this machine.
    with pytest.raises(StackError, match=r"192\.0\.2\.1 \(API\) is not an address of this machine"):
        ensure_free(free_port(), "API", "--api-port", host="192.0.2.1")


def _listening_addresses(port: int) -> set[str]:
    """IPv4 addresses listening on `port`, from the kernel's own table (not from what answers)."""
    found = set()
    for line in PROC_TCP.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def _start_api(kinds: Path, port: int, *host: str) -> subprocess.Popen[bytes]:
    # No Temporal is needed to listen: the API connects to it lazily.
    env = {**os.environ, "SETTLED_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}", "SETTLED_CONFIG": str(kinds)}
    argv = [sys.executable, "-m", "settled", "api", "--api-port", str(port), *host]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# The API's start-up imports a lot: room for a busy machine.
LISTENING_S = 120


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + LISTENING_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"settled api exited with {process.returncode}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"settled api did not answer on port {port} within {LISTENING_S} s")


@pytest.mark.skipif(not PROC_TCP.exists(), reason="reads the listening sockets from /proc/net/tcp (Linux)")
def test_the_api_binds_exactly_the_host_it_was_given(tmp_path: Path) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(sandbox_kinds_text("http://127.0.0.1:8100"))
    default_port, container_port = free_port(), free_port()
    default = _start_api(kinds, default_port)
    container = _start_api(kinds, container_port, "--host", "0.0.0.0")
    try:
        _wait_listening(default, default_port)
        _wait_listening(container, container_port)
        assert _listening_addresses(default_port) == {"127.0.0.1"}
        assert _listening_addresses(container_port) == {"0.0.0.0"}
    finally:
        for process in (default, container):
            process.terminate()
            process.wait(10)
