"""`settled doctor [--json]`: the checks the worker and the API make before serving, on demand, each
with its verdict; non-zero exit when one fails."""

import argparse
import json

from settled.gateway.preflight import preflight

from settled.runtime.config import Settings

MARK = {"ok": "ok", "failed": "FAILED", "degraded": "degraded"}


async def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    _, checks = await preflight(settings)
    failed = any(check.verdict == "failed" for check in checks)
    if args.json:
        report = {
            "ok": not failed,
            "temporal": settings.temporal.described(),
            "checks": [check.as_json() for check in checks],
        }
        print(json.dumps(report, indent=2))
        return 1 if failed else 0
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
        for where, command in check.fix.items():
            print(f"{'':<9}fix ({where}): {command}")
    print("every check passed" if not failed else "settled will not serve until the failed checks pass")
    return 1 if failed else 0
