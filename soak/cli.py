"""`settled soak`: soak a stack of its own and check every answer; exits 1 on any violation."""

import json
from pathlib import Path

from settled.soak.run import SoakConfig, run_soak, summary

from settled.runtime.commandline import Parser


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="settled soak", description=__doc__)
    parser.add_argument("--actions", type=int, default=100, help="actions in all (default 100)")
    parser.add_argument("--concurrency", type=int, default=100, help="actions live at once at most")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds over which actions run")
    parser.add_argument("--seed", type=int, default=1, help="the seed of the random faults and timings")
    parser.add_argument("--poll", type=float, default=1.5, help="seconds between status reads per action")
    parser.add_argument("--settle-timeout", type=float, default=90.0, help="seconds to let actions settle")
    parser.add_argument("--report", type=Path, default=Path("soak-report.json"), help="the JSON report")
    parser.add_argument("--data-dir", type=Path, help="the stack's folder (default: a temporary one)")
    parser.add_argument("--no-progress", action="store_true", help="no live display, even on a terminal")
    args = parser.parse_args(argv)
    for name in ("actions", "concurrency"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.duration <= 0:
        parser.error("--duration must be positive")
    config = SoakConfig(
        actions=args.actions,
        concurrency=args.concurrency,
        duration_s=args.duration,
        seed=args.seed,
        poll_s=args.poll,
        settle_timeout_s=args.settle_timeout,
        data_dir=args.data_dir,
        report=args.report,
        progress=False if args.no_progress else None,
    )
    report = run_soak(config)
    print(summary(report))
    for violation in report["violations"][:20]:
        print(json.dumps(violation))
    print(f"report: {args.report}")
    return 1 if report["violation_count"] else 0
