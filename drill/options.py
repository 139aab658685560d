"""The options of `settled drill`, checked once: every impossible combination says why."""

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from settled.drill.cuts import CUTS, Cut, parse_cuts
from settled.drill.scenario import ARMS

DEFAULT_SEEDS = 3
DEFAULT_CONCURRENCY = 4


class UsageError(ValueError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("drill-results"), help="where the results go")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds per cut and kind")
    parser.add_argument("--cuts", default=",".join(CUTS), help="comma-separated, e.g. C0,C2")
    parser.add_argument("--arms", default=None, help="transcript,state (target mode: state)")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="runs at a time")
    parser.add_argument("--api-url", help="use a running stack's API (with --sandbox-url)")
    parser.add_argument("--sandbox-url", help="the running stack's sandbox")
    parser.add_argument("--target-kind", help="drill a kind of your own service (with --config)")
    parser.add_argument("--config", type=Path, help="the kinds file that declares --target-kind")
    parser.add_argument("--params", help="target mode: the params to request, as JSON")
    parser.add_argument("--changed-params", help="target mode: the params after C6's change, as JSON")


@dataclass(frozen=True)
class Options:
    out: Path
    seeds: int
    cuts: list[Cut]
    arms: list[str]
    concurrency: int
    api_url: str | None
    sandbox_url: str | None
    target_kind: str | None
    config: Path | None
    params: dict[str, Any] | None
    changed_params: dict[str, Any] | None


def _json_object(text: str | None, flag: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UsageError(f"{flag}: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: must be a JSON object")
    return value


def parse_options(args: argparse.Namespace) -> Options:
    try:
        cuts = parse_cuts(args.cuts)
    except ValueError as error:
        raise UsageError(str(error)) from None
    target = args.target_kind is not None
    arms = [part.strip() for part in (args.arms or ("state" if target else ",".join(ARMS))).split(",")]
    if not arms or any(arm not in ARMS for arm in arms):
        raise UsageError(f"--arms: choose from {', '.join(ARMS)}")
    if args.seeds < 1 or args.concurrency < 1:
        raise UsageError("--seeds and --concurrency must be at least 1")
    if (args.api_url is None) != (args.sandbox_url is None):
        raise UsageError("--api-url and --sandbox-url go together (a running stack)")
    if target:
        if args.config is None:
            raise UsageError("--target-kind needs --config, the kinds file that declares it")
        if args.api_url:
            raise UsageError("--target-kind starts its own stack (its kinds point at the fault proxy)")
        if arms != ["state"]:
            raise UsageError("--target-kind drills the state arm only (--arms state)")
    elif args.config is not None or args.params or args.changed_params:
        raise UsageError("--config, --params and --changed-params belong to --target-kind")
    return Options(
        out=args.out,
        seeds=args.seeds,
        cuts=cuts,
        arms=list(dict.fromkeys(arms)),
        concurrency=args.concurrency,
        api_url=args.api_url.rstrip("/") if args.api_url else None,
        sandbox_url=args.sandbox_url.rstrip("/") if args.sandbox_url else None,
        target_kind=args.target_kind,
        config=args.config,
        params=_json_object(args.params, "--params"),
        changed_params=_json_object(args.changed_params, "--changed-params"),
    )
