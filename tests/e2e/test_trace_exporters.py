"""`OTEL_*` is settled's own: each exporter settled ships, through the real processes, and a one-line
refusal of one it does not.

`settled dev` with `OTEL_TRACES_EXPORTER=console,otlp` and OTLP over gRPC starts (the Temporal dev
server, which refuses `console`, never sees the variables), serves a refund, prints its spans on the
API's and the worker's output, and sends them to a real gRPC receiver (`opentelemetry-proto`'s trace
service). `settled server` starts with the same environment.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import Ports
from tests.e2e.otlp import Receiver
from tests.helpers import REFUND, create, new_id, wait_for

SANDBOX_KINDS = Path(__file__).parents[2] / "settled" / "sandbox_kinds.toml"
TRACED = {"OTEL_TRACES_EXPORTER": "console,otlp", "OTEL_BSP_SCHEDULE_DELAY": "100"}


def _settled(*args: str, **env: str) -> subprocess.Popen[str]:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    return subprocess.Popen(
        [sys.executable, "-m", "settled", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**clean, **env},
    )


def _dev_args(data_dir: Path, ports: Ports) -> list[str]:
    return [
        "dev", "--data-dir", str(data_dir), "--api-port", str(ports.api),
        "--temporal-port", str(ports.temporal), "--ui-port", str(ports.ui),
        "--sandbox-port", str(ports.sandbox), "--worker-metrics-port", str(ports.worker_metrics),
    ]  # fmt: skip


def _stopped(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def _log(data_dir: Path, part: str) -> str:
    path = data_dir / "logs" / f"{part}.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def test_dev_with_the_console_and_otlp_grpc_exporters_starts_serves_and_exports(tmp_path: Path) -> None:
    ports, data_dir = Ports.free(), tmp_path / "data"
    with Receiver().running_grpc() as receiver:
        env = {
            **TRACED,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        }
        dev = _settled(*_dev_args(data_dir, ports), **env)
        try:
            api = f"http://127.0.0.1:{ports.api}"
            wait_for(
                lambda: dev.poll() is not None or _healthy(api), 120, "settled dev to serve (or to stop)"
            )
            assert dev.poll() is None, _stopped(dev)
            operation_id = new_id()
            with httpx.Client(base_url=api, timeout=30) as client:
                created = create(
                    client, "refund", REFUND, operation_id=operation_id, authorized=True, wait=10
                )
            assert created.status_code in (200, 201) and created.json()["state"] == "confirmed", created.text

            def exported() -> set[str] | None:
                names = {span.name for span in receiver.spans if span.service == "settled-api"}
                return names if {"POST /v1/actions", "settled.dispatch refund"} <= names else None

            # The API's own worker started the action eagerly: its dispatch is the API's span too.
            wait_for(exported, 60, "the refund's spans at the gRPC receiver")
            # The console exporter printed the same spans on the API's output.
            for name in ("POST /v1/actions", "settled.dispatch refund"):
                wait_for(
                    lambda name=name: f'"name": "{name}"' in _log(data_dir, "api"), 30, f"{name} printed"
                )
        finally:
            output = _stopped(dev)
    assert dev.returncode == 0, output
    assert "OTEL" not in _log(data_dir, "temporal"), _log(data_dir, "temporal")


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_server_starts_with_settled_s_otel_variables(tmp_path: Path) -> None:
    ports = Ports.free()
    server = _settled(
        "server", "--data-dir", str(tmp_path), "--temporal-port", str(ports.temporal),
        "--ui-port", str(ports.ui), **TRACED,
    )  # fmt: skip
    try:
        wait_for(
            lambda: server.poll() is not None or _describes(ports.temporal), 90, "the dev server to answer"
        )
        assert server.poll() is None, _stopped(server)
    finally:
        output = _stopped(server)
    assert "OTEL" not in output, output


def _describes(port: int) -> bool:
    temporal = str(Path(sys.executable).parent / "temporal")
    argv = [temporal, "operator", "namespace", "describe", "default", "--address", f"127.0.0.1:{port}"]
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


@pytest.mark.parametrize(
    ("variables", "words"),
    [
        ({"OTEL_TRACES_EXPORTER": "oltp"}, "OTEL_TRACES_EXPORTER=oltp"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            },
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/json",
        ),
    ],
    ids=["oltp", "zipkin", "http/json"],
)
@pytest.mark.parametrize("part", ["dev", "worker", "api"])
def test_an_exporter_settled_does_not_ship_is_one_line_and_exit_2(
    tmp_path: Path, part: str, variables: dict[str, str], words: str
) -> None:
    args = _dev_args(tmp_path / "data", Ports.free()) if part == "dev" else [part]
    process = _settled(*args, SETTLED_CONFIG=str(SANDBOX_KINDS), **variables)
    output, _ = process.communicate(timeout=60)
    lines = [line for line in output.splitlines() if line.strip()]
    assert process.returncode == 2, output
    assert len(lines) == 1 and lines[0].startswith(f"settled: {words}"), output
    assert not (tmp_path / "data" / "logs").exists()  # refused before anything started
