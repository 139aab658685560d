"""Start-up validation: `settled api` and `settled worker`, run as real processes with one bad
environment variable or a broken kinds file, exit non-zero with a message that names the problem —
before they reach for Temporal or a business service.

"Before connecting anywhere" is observed, not timed: Temporal's address and the sandbox URL point at
a socket this test listens on, and no connection may arrive there. A valid configuration pointed at the
same socket does connect (the last test), so the observation can fail.
"""

import base64
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from settled.runtime.stack import free_port
from tests.helpers import wait_for

KEY = "tenant-key-0123456789"
SHORT_KEY = "s3cr3t!"  # 7 characters: too short
SECRET_KEY_MATERIAL = base64.b64encode(b"k" * 16).decode()  # 16 bytes: a wrong length
GOOD_KIND = """
[kinds.refund]
description = "refund the order"
params_schema = { type = "object", properties = { amount = { type = "number" } } }
dispatch = { method = "POST", url = "@URL@/refunds" }
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """Where Temporal and the business services are said to be: it accepts nothing, it only notices."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield sock


def _connected(sock: socket.socket) -> bool:
    try:
        connection, _ = sock.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def _env(listener: socket.socket, **variables: str) -> dict[str, str]:
    port = listener.getsockname()[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SETTLED_")}
    return {
        **base,
        "SETTLED_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "SETTLED_SANDBOX_URL": f"http://127.0.0.1:{port}",
        "SETTLED_WORKER_METRICS_PORT": str(free_port()),
        **variables,
    }


def _run_parts(env: dict[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
    """`settled api` and `settled worker` with the same environment, side by side."""
    argv = {
        "api": [sys.executable, "-m", "settled", "api", "--api-port", str(free_port())],
        "worker": [sys.executable, "-m", "settled", "worker"],
    }

    def run(part: str) -> subprocess.CompletedProcess[str]:
        # A part that does not fail at start-up would run until this timeout: the test then fails.
        return subprocess.run(argv[part], env=env, capture_output=True, text=True, timeout=60)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(argv, pool.map(run, argv), strict=True))


def _assert_refused(
    runs: dict[str, subprocess.CompletedProcess[str]], listener: socket.socket, *named: str
) -> None:
    for part, run in runs.items():
        assert run.returncode == 2, f"{part}: {run.returncode}\n{run.stdout}\n{run.stderr}"
        assert run.stderr.startswith("settled: "), f"{part}: {run.stderr}"
        for words in named:
            assert words in run.stderr, f"{part} did not name {words!r}: {run.stderr}"
        assert "Traceback" not in run.stderr, run.stderr
    assert not _connected(listener), "a part connected before refusing its configuration"


# One bad value per variable; tests/unit/test_config.py holds every other refusal, without processes.
@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SETTLED_TEMPORAL_ADDRESS", "127.0.0.1:99999", "port 1-65535"),
        ("SETTLED_NAMESPACE", "my namespace", "A-Z a-z 0-9"),
        ("SETTLED_CONFIG", "/nonexistent/kinds.toml", "no such kinds file"),
        ("SETTLED_API_KEYS", f"acme:{SHORT_KEY}", "shorter than 8"),
        ("SETTLED_SANDBOX_URL", "http://", "no host"),
        ("SETTLED_MAX_BODY_BYTES", "lots", "1024 to 16777216"),
        ("SETTLED_ENCRYPTION_KEYS", f"k1:{SECRET_KEY_MATERIAL}", "must be 32 bytes"),
        ("SETTLED_CODEC_CORS_ORIGINS", "*", "never *"),
        ("SETTLED_WORKER_METRICS_PORT", "70000", "port number"),
        ("SETTLED_RATE_LIMIT", "fast", "N/s"),
    ],
)
def test_a_bad_variable_stops_both_parts_naming_it(
    listener: socket.socket, variable: str, value: str, named: str
) -> None:
    runs = _run_parts(_env(listener, **{variable: value}))
    _assert_refused(runs, listener, variable, named)
    for run in runs.values():  # keys are secrets: a message names them, never prints them
        assert SHORT_KEY not in run.stderr and SECRET_KEY_MATERIAL not in run.stderr


DISPATCH = 'dispatch = { method = "POST", url = "@URL@/refunds" }'
BAD_KINDS = [
    ("[kinds.refund\n", "not valid TOML"),
    (GOOD_KIND + 'colour = "blue"\n', "kinds.refund.colour: unknown key"),
    (GOOD_KIND.replace("@URL@", "ftp://127.0.0.1"), "kinds.refund.dispatch.url: must be an http"),
    (GOOD_KIND.replace('"number"', '"amount"'), "kinds.refund.params_schema: not a valid JSON Schema"),
    (GOOD_KIND.replace(DISPATCH, ""), "kinds.refund.dispatch: missing"),
]


@pytest.mark.parametrize(("text", "named"), BAD_KINDS, ids=[named for _, named in BAD_KINDS])
def test_a_broken_kinds_file_stops_both_parts_naming_the_key(
    listener: socket.socket, tmp_path: Path, text: str, named: str
) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(text.replace("@URL@", "http://127.0.0.1:8100"))
    runs = _run_parts(_env(listener, SETTLED_CONFIG=str(kinds)))
    _assert_refused(runs, listener, str(kinds), named)


def test_a_misspelt_variable_is_named_with_the_right_one(listener: socket.socket) -> None:
    """A typo of SETTLED_API_KEYS would run the API open: said at start-up (a warning; other tools may
    set SETTLED_* variables of their own), beside the real error that stops it here."""
    runs = _run_parts(_env(listener, SETTLED_API_KEY=f"acme:{KEY}", SETTLED_RATE_LIMIT="fast"))
    _assert_refused(runs, listener, "SETTLED_RATE_LIMIT")
    for run in runs.values():
        assert "warning: SETTLED_API_KEY is not a setting" in run.stderr
        assert "did you mean SETTLED_API_KEYS?" in run.stderr


def test_a_valid_configuration_does_reach_for_temporal(listener: socket.socket, tmp_path: Path) -> None:
    """The control: the same worker with a good kinds file connects to the listener, so a refusal
    above that did not connect was a refusal before connecting."""
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(GOOD_KIND.replace("@URL@", "http://127.0.0.1:8100"))
    worker = subprocess.Popen(
        [sys.executable, "-m", "settled", "worker"],
        env=_env(listener, SETTLED_CONFIG=str(kinds)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _connected(listener), 30, "the worker to connect to 'Temporal'")
    finally:
        worker.kill()
        worker.wait(10)


def test_without_a_kinds_file_both_parts_refuse_instead_of_running_the_sandbox_kinds(
    listener: socket.socket,
) -> None:
    """A production worker must never quietly send real requests to a sandbox's addresses."""
    runs = _run_parts(_env(listener))
    _assert_refused(runs, listener, "SETTLED_CONFIG is not set", "kinds file")


SECRET_KIND = GOOD_KIND + 'auth = { type = "bearer", token = "{secret.REFUND_API_TOKEN}" }\n'


@pytest.mark.parametrize(
    ("secret_env", "named"),
    [
        ({}, "the secret REFUND_API_TOKEN is not set: set REFUND_API_TOKEN, or REFUND_API_TOKEN_FILE"),
        ({"REFUND_API_TOKEN": ""}, "the secret REFUND_API_TOKEN is not set"),  # empty counts as not set
        ({"REFUND_API_TOKEN_FILE": "/nonexistent/token"}, "REFUND_API_TOKEN_FILE names a file that cannot"),
    ],
)
def test_a_missing_secret_stops_both_parts_naming_the_variable(
    listener: socket.socket, tmp_path: Path, secret_env: dict[str, str], named: str
) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(SECRET_KIND.replace("@URL@", "http://127.0.0.1:8100"))
    env = {k: v for k, v in _env(listener, SETTLED_CONFIG=str(kinds)).items() if "REFUND_API" not in k}
    runs = _run_parts({**env, **secret_env})
    _assert_refused(runs, listener, "kind refund", named)


def test_a_handler_that_does_not_import_stops_both_parts_naming_it(
    listener: socket.socket, tmp_path: Path
) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text('[kinds.refund]\ndescription = "refund"\nhandler = "my_app.nowhere:refund"\n')
    runs = _run_parts(_env(listener, SETTLED_CONFIG=str(kinds)))
    _assert_refused(
        runs, listener, "kind refund: handler 'my_app.nowhere:refund': cannot import my_app.nowhere"
    )
