"""`settled`: the command line (docs/reference.md). Thin: each command hands over to its module."""

import argparse
import asyncio
import ipaddress
import math
import os
import signal
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import NoReturn

from settled.runtime.commandline import Parser
from settled.runtime.config import SettingsError, unknown_variables


def _bind_address(text: str) -> str:
    """An IP address to listen on. A literal, not a name: the socket binds exactly what was asked."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an IP address: use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        ) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _command(sub: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")


def _parts(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dev = _command(sub, "dev", "start the Temporal dev server, worker, API and sandbox on loopback")
    dev.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        default=Path(".settled"),
        help="where Temporal's data and the logs live",
    )
    dev.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the kinds file (default: SETTLED_CONFIG, else the sandbox kinds)",
    )
    dev.add_argument("--api-port", type=int, metavar="PORT", default=8000, help="the channel API's port")
    dev.add_argument(
        "--temporal-port", type=int, metavar="PORT", default=7233, help="the Temporal dev server's gRPC port"
    )
    dev.add_argument("--ui-port", type=int, metavar="PORT", default=8233, help="the Temporal Web UI's port")
    dev.add_argument(
        "--sandbox-port", type=int, metavar="PORT", default=8100, help="the sandbox business services' port"
    )
    dev.add_argument(
        "--worker-metrics-port",
        type=int,
        metavar="PORT",
        default=9464,
        help="the worker's Prometheus metrics",
    )
    dev.add_argument(
        "--no-sandbox", action="store_true", help="start no sandbox services (your kinds call your services)"
    )

    server = _command(sub, "server", "the Temporal dev server alone")
    server.add_argument(
        "--data-dir", type=Path, metavar="DIR", default=Path(".settled"), help="where Temporal's data lives"
    )
    server.add_argument("--temporal-port", type=int, metavar="PORT", default=7233, help="the gRPC port")
    server.add_argument("--ui-port", type=int, metavar="PORT", default=8233, help="the Web UI's port")

    worker = _command(sub, "worker", "the worker alone (needs SETTLED_CONFIG)")
    worker.add_argument(
        "--kinds",
        default=None,
        metavar="A,B",
        help="serve only these kinds' task queues (default: every kind in the kinds file)",
    )
    worker.add_argument(
        "--no-workflows",
        action="store_true",
        help="leave the workflow task queue to other workers: serve only the kinds' queues",
    )
    api = _command(sub, "api", "the channel API alone (needs SETTLED_CONFIG)")
    api.add_argument("--api-port", type=int, metavar="PORT", default=8000, help="the port to listen on")
    # Loopback by default; a container needs 0.0.0.0 for its published port to reach the API.
    api.add_argument(
        "--host",
        type=_bind_address,
        default="127.0.0.1",
        help="the IP address to listen on (0.0.0.0: every interface, as in a container)",
    )
    sandbox = _command(sub, "sandbox", "the sandbox business services alone")
    sandbox.add_argument(
        "--sandbox-port", type=int, metavar="PORT", default=8100, help="the port to listen on"
    )
    sandbox.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        default=Path(".settled"),
        help="where the services' records live",
    )


def _operators(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    def add(name: str, help: str) -> argparse.ArgumentParser:
        parser = _command(sub, name, help)
        parser.add_argument("--json", action="store_true", help="JSON instead of a table")
        parser.add_argument("--tenant", default=None, help="the tenant, when API keys are configured")
        return parser

    listing = add("list", help="find actions (Temporal visibility)")
    listing.add_argument("--conversation", metavar="ID", help="only this conversation's actions")
    listing.add_argument("--state", help="only actions in this state (requested, running, unknown, ...)")
    listing.add_argument("--kind", help="only actions of this kind")
    for name, text in (
        ("status", "an action's full record"),
        ("authorize", "authorize an action"),
        ("cancel", "cancel an action"),
        ("reconcile", "look an action up in the business system now"),
        ("export-history", "the workflow history of an action, as JSON"),
    ):
        add(name, text).add_argument("operation_id", help="the action's operation id")
    doctor = _command(
        sub, "doctor", "check that settled can run on its Temporal (the checks the worker and the API make)"
    )
    doctor.add_argument("--json", action="store_true", help="JSON instead of text")
    replay = add("replay", help="replay workflow histories against the current code")
    replay.add_argument(
        "operation_ids", nargs="*", metavar="ID", help="the actions whose histories to replay"
    )
    replay.add_argument("--query", help="a visibility query selecting workflows to replay")
    replay.add_argument(
        "--file",
        action="append",
        type=Path,
        default=[],
        help="an exported history JSON file (repeatable; needs no server)",
    )
    replay.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long the replay of one history may take before it is reported stuck (exit 1)",
    )


DESCRIPTION = """\
settled keeps each consequential action of a voice or chat assistant (a refund, a booking) in
explicit, verified state on Temporal: requested, running, unknown, confirmed, failed or cancelled.
Only the business system's answer makes an action confirmed.

Try it: `settled dev` runs everything on this machine (Temporal, the worker, the API and sandbox
business services) and prints where each listens; the API's own docs are at its /docs."""

EPILOG = """\
In production each part runs alone (worker, api; server for a local Temporal). Every command reads
its configuration from the environment: SETTLED_CONFIG (the kinds file), SETTLED_TEMPORAL_ADDRESS and
SETTLED_NAMESPACE or Temporal's own TEMPORAL_* variables, SETTLED_API_KEYS. `settled doctor` checks
that the Temporal they name is ready for settled.

`settled COMMAND --help` shows a command's flags. Exit status: 0 done, 1 failed, 2 bad usage or
configuration. The full reference is docs/reference.md in settled's repository."""


def parser() -> argparse.ArgumentParser:
    # drill.plan, not drill.cli: standard library only, so every start stays light (matplotlib and
    # rich load when the drill runs).
    from settled.drill.plan import add_arguments as add_drill_arguments

    root = Parser(prog="settled", description=DESCRIPTION, epilog=EPILOG)
    root.add_argument("--version", action="version", version=f"settled {version('settled')}")
    sub = root.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    _parts(sub)
    _operators(sub)
    check = _command(
        sub, "check-kinds", "validate a kinds file offline and print the requests each kind would send"
    )
    check.add_argument("file", nargs="?", type=Path, help="the kinds file (default: SETTLED_CONFIG)")
    check.add_argument("--json", action="store_true", help="JSON instead of text")
    add_drill_arguments(_command(sub, "drill", "cut a task at every dangerous moment; compare two agents"))
    for name, text in TOOLS.items():  # their own parsers read the rest of the line
        sub.add_parser(name, help=text, add_help=False).add_argument("rest", nargs=argparse.REMAINDER)
    return root


# Tools with a command line of their own, run as `settled NAME ...`.
TOOLS = {
    "soak": "soak a stack of its own under faults and judge every answer (settled soak --help)",
    "bench": "measure what durability costs beside the bare call and Temporal's floor (settled bench --help)",
    "page-link": "print the signed link to a conversation's text page (settled page-link --help)",
    "token": "print a conversation token for a browser agent (settled token --help)",
    "platform-tools": "print a voice platform's tools for the kinds (settled platform-tools --help)",
}


def _run_tool(name: str, argv: list[str]) -> int:
    if name == "soak":
        from settled.soak.cli import main as soak

        return soak(argv)
    if name in ("page-link", "token"):
        from settled.cli import signing

        return signing.page_link(argv) if name == "page-link" else signing.token(argv)
    if name == "platform-tools":
        from settled.api.edges.platforms.tools import main as platform_tools

        return platform_tools(argv)
    from settled.bench.cli import main as bench

    return bench(argv)


def _run_part(args: argparse.Namespace) -> None:
    from settled.cli import parts

    handlers: dict[str, Callable[[argparse.Namespace], None]] = {
        "dev": parts.dev,
        "server": parts.server,
        "worker": parts.worker,
        "api": parts.api,
        "sandbox": parts.sandbox,
    }
    handlers[args.command](args)


SERVER_MODULES = ("temporalio", "fastapi", "uvicorn", "jsonschema", "rich", "sse_starlette", "matplotlib")


def main(argv: list[str] | None = None) -> None:
    try:
        try:
            _main(argv)
        finally:
            sys.stdout.flush()  # a reader gone is found here, not in the interpreter's own exit
    except BrokenPipeError:
        _reader_gone()
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in SERVER_MODULES:
            # The light install (the client and the adapters) has no server parts.
            print(
                f"settled: this command needs {error.name}, which the light install leaves out: "
                "pip install 'settled[server]' (or 'settled[tools]' for the drill, soak and bench)",
                file=sys.stderr,
            )
            sys.exit(2)
        raise


def _reader_gone() -> NoReturn:
    """The reader of our output stopped early (`| head`): end as a Unix tool does, killed by SIGPIPE,
    quietly. Python ignores SIGPIPE and raises instead; the default action comes back for this end."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush into the closed pipe
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)


def _check_kinds(args: argparse.Namespace) -> int:
    """Offline: the file validated, code kinds' handlers imported, and per kind what it would send for
    example params (secrets masked as `{secret.NAME}`, with whether each is set here)."""
    import json

    from settled.business.code import with_handlers
    from settled.business.preview import preview
    from settled.domain.kinds import load_kinds
    from settled.runtime.config import Settings

    path = args.file or Settings.from_env().kinds_file("check-kinds")
    kinds, _ = with_handlers(load_kinds(path))
    shown = preview(kinds)
    if args.json:
        print(json.dumps({"file": str(path), "kinds": shown}, indent=2))
        return 0
    print(f"{path}: {len(shown)} kind(s), valid")
    for kind in shown:
        print(f"\n[{kind['kind']}]  example params: {json.dumps(kind['params'])}")
        if "params_unfit" in kind:
            print(f"  these params do not fit its schema: {kind['params_unfit']}")
        for name, state in kind["secrets"].items():
            print(f"  secret {name}: {state} here")
        if "handler" in kind:
            print(f"  handler {kind['handler']} (imported)")
        for role, request in kind.get("requests", {}).items():
            print(f"  {role}: {request['method']} {request['url']}")
            for name, value in request["headers"].items():
                print(f"    {name}: {value}")
            if request["body"] is not None:
                print("    " + request["body"].replace("\n", "\n    ").rstrip())
    return 0


async def _operator_command(args: argparse.Namespace) -> int:
    # Each imports only its own module: an operator's command starts as fast as it can.
    if args.command == "doctor":
        from settled.cli import doctor

        return await doctor.run(args)
    from settled.cli import operators

    return await operators.run(args)


def _main(argv: list[str] | None = None) -> None:
    from settled.business.code import HandlerError
    from settled.business.secrets import SecretError
    from settled.domain.kinds import KindsFileError

    line = sys.argv[1:] if argv is None else argv
    if line and line[0] in TOOLS:
        sys.exit(_run_tool(line[0], line[1:]))
    root = parser()
    args = root.parse_args(argv)
    if args.command is None:
        root.print_help(sys.stderr)
        sys.exit(2)
    try:
        if args.command in ("dev", "server", "worker", "api", "sandbox"):
            for warning in unknown_variables():
                print(f"settled: warning: {warning}", file=sys.stderr, flush=True)
            _run_part(args)
        elif args.command == "check-kinds":
            sys.exit(_check_kinds(args))
        elif args.command == "drill":
            from settled.drill.cli import run as run_drill

            sys.exit(run_drill(args))
        else:
            code = asyncio.run(_operator_command(args))
            # The Temporal SDK's runtime threads can abort a finalizing interpreter (PyGILState_Release):
            # flush and leave without finalization, so the exit code is ours.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    except (SettingsError, KindsFileError, HandlerError, SecretError) as error:
        print(f"settled: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
