"""The preflight on a Temporal that lacks what settled needs: a dev server started without settled's
search attributes, with eager start turned off. The worker refuses to serve,
naming each missing attribute and the commands that register them; `settled doctor` says the same
check by check; the self-hosted command it prints, run as printed, makes the namespace pass. And the
operators' commands answer a bad request with one line, never a traceback.
"""

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from settled.runtime.stack import Child, free_port, temporal_binary, wait_until
from settled.temporal import visibility


def _tcp_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dev server as an operator might have left it: no search attributes, eager start off."""
    folder = tmp_path_factory.mktemp("bare")
    port = free_port()
    argv = [
        str(temporal_binary()), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(free_port(frozenset({port}))), "--log-level", "error",
        "--dynamic-config-value", "system.enableEagerWorkflowStart=false",
    ]  # fmt: skip
    server = Child("temporal", argv, {"PATH": "/usr/bin:/bin"}, folder / "temporal.log").start()
    try:
        wait_until(lambda: _tcp_open(port), 60, "the bare dev server", server)
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


def _env(address: str, tmp_path: Path, **variables: str) -> dict[str, str]:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(
        '[kinds.refund]\ndescription = "refund"\n'
        'dispatch = { method = "POST", url = "http://127.0.0.1:9/refunds" }\n'
    )
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    return {**base, "SETTLED_TEMPORAL_ADDRESS": address, "SETTLED_CONFIG": str(kinds), **variables}


def settled(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "settled", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_missing_search_attributes_are_refused_by_name_and_the_printed_fix_works(
    bare: str, tmp_path: Path
) -> None:
    env = _env(bare, tmp_path)
    worker = settled(env, "worker")
    said = worker.stderr.strip()
    assert worker.returncode == 2, said
    assert len(said.splitlines()) == 1 and "Traceback" not in said
    for name in visibility.declared():
        assert f"{name} is not registered" in said
    assert "fix (self-hosted): temporal operator search-attribute create --namespace default" in said
    assert "fix (Temporal Cloud): tcld namespace search-attributes add --namespace default" in said

    doctor = settled(env, "doctor", "--json")
    assert doctor.returncode == 1
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["connection"]["verdict"] == "ok" and checks["namespace"]["verdict"] == "ok"
    for name, kind in visibility.declared().items():
        assert checks[f"search attribute {name} ({kind})"]["verdict"] == "failed"
    assert checks["eager workflow start"]["verdict"] == "degraded"
    assert checks["workflow updates"]["verdict"] == "ok"

    # The fix, run exactly as printed (with this server's address), registers every attribute.
    fix = checks[f"search attribute {visibility.STATE.name} (Keyword)"]["fix"]["self-hosted"]
    argv = shlex.split(fix)
    assert argv[0] == "temporal"
    ran = subprocess.run(
        [str(temporal_binary()), *argv[1:], "--address", bare], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    after = {check["name"]: check for check in json.loads(settled(env, "doctor", "--json").stdout)["checks"]}
    for name, kind in visibility.declared().items():
        assert after[f"search attribute {name} ({kind})"]["verdict"] == "ok"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["export-history", "no-such"], "not_found", "no action with operation id 'no-such'"),
        (["replay", "no-such"], "not_found", "no action with operation id 'no-such'"),
        (["replay", "--file", "missing.json"], "invalid_request", "--file missing.json"),
        (["replay", "--file", "not-history.json"], "invalid_request", "not a workflow history"),
        (["replay", "--query", "garbage = ="], "invalid_request", "--query"),
    ],
)
def test_operators_answer_a_bad_request_in_one_line_not_a_traceback(
    bare: str, tmp_path: Path, args: list[str], code: str, words: str
) -> None:
    env = _env(bare, tmp_path)
    (tmp_path / "not-history.json").write_text(json.dumps({"events": "none", "hello": 1}))
    result = subprocess.run(
        [sys.executable, "-m", "settled", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    line = result.stderr.strip()
    assert line.startswith(f"settled: {code}: ") and words in line, line
    as_json = subprocess.run(
        [sys.executable, "-m", "settled", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert json.loads(as_json.stdout)["error"]["code"] == code
