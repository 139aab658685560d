"""`settled bench [--tiny] [--out DIR] [--only bulkhead]`: start a stack, measure, print the tables,
write JSON."""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from settled.bench.calls import DOORS
from settled.bench.measures import Sizes
from settled.bench.report import markdown, rich_tables
from settled.bench.runner import STEPS, run_bench

from settled.runtime.commandline import Parser
from settled.runtime.stack import SQLITE_PRAGMAS


def probe_count(argv: list[str] | None, prog: str, description: str | None, default: int, help: str) -> int:
    """The one argument of a probe (`python -m settled.bench.records N`, `…timeline N`): how many of
    each to run, at least 1."""
    parser = Parser(prog=prog, description=description)
    parser.add_argument("n", nargs="?", type=int, default=default, help=help)
    n: int = parser.parse_args(argv).n
    if n < 1:
        parser.error("n must be at least 1")
    return n


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("burst sizes must be at least 1")
    return sizes


def _doors(text: str) -> tuple[str, ...]:
    doors = tuple(text.split(","))
    if not doors or not set(doors) <= set(DOORS):
        raise argparse.ArgumentTypeError(f"doors are some of {', '.join(DOORS)}, got {text!r}")
    return doors


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="settled bench", description=__doc__)
    parser.add_argument("--tiny", action="store_true", help="a few samples each: proves it works (CI)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where results.json goes")
    parser.add_argument("--throughput-s", type=float, help="seconds of the sustained-throughput run")
    parser.add_argument("--sequential", type=int, help="samples of the bare and the durable call")
    parser.add_argument(
        "--env",
        action="append",
        type=_assignment,
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the stack",
    )
    parser.add_argument(
        "--sqlite-pragmas",
        help="the dev server's SQLite pragmas, comma-separated ('' for SQLite's defaults); "
        f"default {','.join(SQLITE_PRAGMAS)}",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes on the task queue")
    parser.add_argument("--loads", type=_sizes, help="burst sizes, comma-separated (default 10,100,1000)")
    parser.add_argument("--only", choices=STEPS, default="all", help="run one step alone (after a warm-up)")
    parser.add_argument(
        "--degraded", type=int, help="bulkhead step: the degraded kind's actions requested (default 600)"
    )
    parser.add_argument(
        "--answer-s", type=float, help="bulkhead step: seconds its service takes to answer (default 30)"
    )
    parser.add_argument("--bulkhead-samples", type=int, help="bulkhead step: healthy calls alone and beside")
    parser.add_argument("--calls", type=int, help="whole calls: calls per door and shape of kind (default 3)")
    parser.add_argument("--call-actions", type=int, help="whole calls: actions in each call (default 10)")
    parser.add_argument(
        "--doors", type=_doors, help=f"whole calls: doors, comma-separated (default {','.join(DOORS)})"
    )
    args = parser.parse_args(argv)
    sizes = Sizes.tiny() if args.tiny else Sizes()
    if args.throughput_s is not None:
        sizes = replace(sizes, throughput_s=args.throughput_s)
    if args.sequential is not None:
        sizes = replace(sizes, sequential=args.sequential)
    if args.loads is not None:
        sizes = replace(sizes, loads=args.loads)
    for name, value in (
        ("bulkhead_degraded", args.degraded),
        ("bulkhead_answer_s", args.answer_s),
        ("bulkhead_samples", args.bulkhead_samples),
        ("calls", args.calls),
        ("call_actions", args.call_actions),
        ("call_doors", args.doors),
    ):
        if value is not None:
            sizes = replace(sizes, **{name: value})
    extra_env = dict(args.env)

    console = Console(stderr=True)
    pragmas = SQLITE_PRAGMAS
    if args.sqlite_pragmas is not None:
        pragmas = tuple(filter(None, args.sqlite_pragmas.split(",")))
    document = run_bench(sizes, lambda line: console.log(line), extra_env, pragmas, args.workers, args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.out / "results.md").write_text(markdown(document) + "\n")
    out = Console()
    for table in rich_tables(document):
        out.print(table)
    out.print(f"written: {args.out / 'results.json'}, {args.out / 'results.md'}")
    return 0
