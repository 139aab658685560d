"""`settled doctor [--json]`: the checks the worker and the API make before serving, on demand, each
with its verdict, then each distinct fix once; non-zero exit when one fails. `--json` answers JSON on
every outcome, a configuration it cannot read included."""

import argparse
import json
import sys
from typing import Any

from settled.gateway.preflight import Check, fixes, preflight

from settled.runtime.config import Settings, SettingsError

MARK = {"ok": "ok", "failed": "FAILED", "degraded": "degraded"}


def _report(temporal: dict[str, Any] | None, checks: list[Check]) -> dict[str, Any]:
    return {
        "ok": all(check.verdict != "failed" for check in checks),
        "temporal": temporal,
        "checks": [check.as_json() for check in checks],
        "fixes": fixes(checks),
    }


async def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
    except SettingsError as error:
        # The same refusal as every part's (exit 2), and still a report for whoever reads --json.
        if args.json:
            print(json.dumps(_report(None, [Check("configuration", "failed", str(error))]), indent=2))
        print(f"settled: {error}", file=sys.stderr)
        return 2
    _, checks = await preflight(settings)
    report = _report(settings.temporal.described(), checks)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 1
    described = settings.temporal.described()
    print(f"Temporal at {settings.temporal_address}, namespace {settings.namespace!r}")
    shown = ("tls", "api_key", "server_ca", "client_certificate", "server_name", "profile", "config_file")
    for name in shown:
        value = described[name]
        if value not in (None, False, ""):
            print(f"  {name.replace('_', ' ')}: {'yes' if value is True else value}")
    width = max(len(check.name) for check in checks)
    for check in checks:
        print(f"{MARK[check.verdict]:<9}{check.name:<{width + 2}}{check.detail}")
    if report["fixes"]:
        print("\nto fix:")
        for fix in report["fixes"]:
            print(f"  {fix['where']}: {fix['command']}")
    print()
    print("every check passed" if report["ok"] else "settled will not serve until the failed checks pass")
    return 0 if report["ok"] else 1
