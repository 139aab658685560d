"""The long-running parts of settled, each runnable alone, and `dev`, which runs them all."""

import argparse
import asyncio
import gc
import os
import signal
import subprocess
import sys
import threading
from typing import NoReturn

from settled.business.startup import prepare
from settled.domain.kinds import load_kinds
from settled.runtime.config import Settings
from settled.runtime.logs import configure as configure_logs
from settled.runtime.stack import Ports, Stack, StackError, ensure_free, without_otel


def _fail(message: str) -> None:
    print(f"settled: {message}", file=sys.stderr)
    sys.exit(1)


def _leave(line: str, code: int) -> NoReturn:
    """One line, then out without finalizing: the Temporal SDK's runtime threads can abort a
    finalizing interpreter (PyGILState_Release), which would replace our exit code and line."""
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


class _Stopped(BaseException):
    """SIGINT or SIGTERM while the stack starts."""


def _interrupt(*_: object) -> None:
    raise _Stopped


def _stop_event() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def dev(args: argparse.Namespace) -> None:
    settings = Settings.from_env()
    config = args.config or settings.config_path
    ports = Ports(
        api=args.api_port,
        temporal=args.temporal_port,
        ui=args.ui_port,
        sandbox=args.sandbox_port,
        worker_metrics=args.worker_metrics_port,
    )
    stack = Stack(args.data_dir, ports, config=config, sandbox=not args.no_sandbox)
    if not args.no_sandbox:
        stack.extra_env["SETTLED_SANDBOX_URL"] = stack.sandbox_url
    # A bad kinds file, a handler that does not import or a missing secret fails here, before anything starts.
    prepare(load_kinds(config, stack.sandbox_url), sends=True)
    # A stop asked for while the stack starts stops it at once (start() stops what it started).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        stack.start()
    except StackError as error:
        _fail(str(error))
    except _Stopped:
        print("settled dev stopped while starting", flush=True)
        sys.exit(0)
    stop = _stop_event()
    print("settled dev is up (Ctrl-C stops everything):")
    print(f"  API          {stack.api_url}   (docs at {stack.api_url}/docs)")
    print(f"  Temporal     {stack.temporal_address}   (data in {stack.data_dir})")
    print(f"  Temporal UI  {stack.ui_url}")
    if stack.sandbox:
        print(f"  sandbox      {stack.sandbox_url}   (records at {stack.sandbox_url}/_sandbox/records)")
    print(f"  worker metrics {stack.worker_metrics_url}")
    print(f"  logs         {stack.data_dir / 'logs'}", flush=True)
    try:
        while not stop.wait(0.5):
            dead = [child.name for child in stack.children.values() if child.exited()]
            if dead:
                print(
                    f"settled: {', '.join(dead)} exited; stopping the stack (see the logs)", file=sys.stderr
                )
                break
    finally:
        stack.stop()
        print("settled dev stopped", flush=True)


def server(args: argparse.Namespace) -> None:
    stack = Stack(args.data_dir, Ports(temporal=args.temporal_port, ui=args.ui_port), sandbox=False)
    try:
        ensure_free(args.temporal_port, "Temporal", "--temporal-port")
        ensure_free(args.ui_port, "Temporal UI", "--ui-port")
    except StackError as error:
        _fail(str(error))
    process = subprocess.Popen(stack.server_argv(), env=without_otel(os.environ))
    stop = _stop_event()
    print(f"Temporal dev server on {stack.temporal_address}, UI on {stack.ui_url}", flush=True)
    while not stop.wait(0.5) and process.poll() is None:
        pass
    if process.poll() is None:
        process.terminate()
    sys.exit(process.wait())


def worker(args: argparse.Namespace) -> None:
    from settled.gateway.preflight import Refused
    from settled.workers.main import main

    settings = Settings.from_env()
    # The worker runs each action on the kinds copied into it, but a deployment whose kinds file is
    # missing or broken is broken: it fails here, at start-up, as the API does, not at the first request;
    # so does one whose handlers do not import or whose secrets are not set (those of the kinds it serves).
    kinds = load_kinds(settings.kinds_file("worker"), settings.sandbox_url)
    served = list(kinds)
    if args.kinds is not None:
        names = [name.strip() for name in args.kinds.split(",") if name.strip()]
        unknown = [name for name in names if kinds.get(name) is None]
        if not names or unknown:
            problem = f"unknown kind {', '.join(unknown)}" if unknown else "no kind named"
            print(
                f"settled: --kinds {args.kinds!r}: {problem} (the kinds file {kinds.source} has "
                f"{', '.join(kinds.names())})",
                file=sys.stderr,
            )
            sys.exit(2)
        served = [spec for spec in served if spec.name in names]
    names = [spec.name for spec in served]
    kinds, handlers = prepare(kinds, sends=True, serving=names)
    try:
        served_kinds = [spec for spec in kinds if spec.name in names]
        main(settings, served_kinds, handlers, workflows=not args.no_workflows)
    except Refused as refused:
        _leave(f"settled: worker: {refused}", 2)


def api(args: argparse.Namespace) -> None:
    import uvicorn
    from settled.api.app import create_app
    from settled.gateway.preflight import Refused, ready

    settings = Settings.from_env()
    app = create_app(settings, load_kinds(settings.kinds_file("api"), settings.sandbox_url))
    try:
        ensure_free(args.api_port, "API", "--api-port", host=args.host)
    except StackError as error:
        _fail(str(error))
    try:
        # Checked before serving; a Temporal not up yet is no refusal (the API connects when asked).
        _, notes = asyncio.run(ready(settings, unreachable_ok=True))
    except Refused as refused:
        _leave(f"settled: api: {refused}", 2)
    for note in notes:
        print(f"settled api: note: {note}", file=sys.stderr, flush=True)
    configure_logs("api")
    # Everything imported and built so far lives as long as the process: out of the collector's
    # sight, so that its full passes under load do not walk it again and again.
    gc.freeze()
    uvicorn.run(app, host=args.host, port=args.api_port, log_level="warning", log_config=None)


def sandbox(args: argparse.Namespace) -> None:
    from settled.sandbox.server import serve

    args.data_dir.mkdir(parents=True, exist_ok=True)
    serve(port=args.sandbox_port, db_path=args.data_dir / "sandbox.sqlite3")
