"""Running the sandbox as a process: `serve()` blocks until SIGINT or SIGTERM, then exits cleanly."""

import errno
import signal
import socket
import threading
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from settled.sandbox.app import create_app
from settled.sandbox.state import Sandbox, sandbox_of_app

# Held or hanging requests would otherwise keep a stopping server waiting for ever.
GRACEFUL_SHUTDOWN_S = 1


def listen(host: str, port: int) -> socket.socket:
    """Bind the port ourselves, so "in use" is a clear message rather than a uvicorn log line."""
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets that say they are TCP,
    # and without it every answer waits ~40 ms on delayed ACKs.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        why = (
            "is already in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
        )
        raise SystemExit(
            f"sandbox: port {port} on {host} {why}; stop what holds it or pick another port"
        ) from None
    sock.listen(128)
    return sock


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, sandbox: Sandbox) -> None:
        super().__init__(config)
        self._sandbox = sandbox

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Held, hanging and delayed requests would keep shutdown waiting (then be cancelled, with a
        # traceback each): give them up first, so they answer 503 and their connections close.
        self._sandbox.faults.abort()
        await super().shutdown(sockets)


def make_server(app: FastAPI) -> uvicorn.Server:
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    return _Server(config, sandbox_of_app(app))


def serve(
    host: str = "127.0.0.1", port: int = 8100, db_path: str | Path = ".settled/sandbox.sqlite3"
) -> None:
    sock = listen(host, port)
    try:
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        server = make_server(create_app(db_path))
        _run_until_signalled(server, sock)
    finally:
        sock.close()


def _run_until_signalled(server: uvicorn.Server, sock: socket.socket) -> None:
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal with the previous
    # handler; mapping SIGTERM to KeyboardInterrupt makes both end here, with exit status 0.
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if in_main else None
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
