"""The shipped Prometheus rules: valid (`promtool check rules`), every alert firing and not firing on
written series (`promtool test rules`), and each alert with a severity, a plain summary and a runbook
section that exists."""

import re
import shutil
import subprocess

import pytest
import yaml

from tests.oncall.conftest import RULES, RUNBOOK

# What on call must learn of, one alert each (docs/operations.md).
ALERTS = {
    "SettledActionsNeedAttention",
    "SettledBusinessErrors",
    "SettledBusinessRefusals",
    "SettledLookupsFailing",
    "SettledLookupsStopped",
    "SettledTaskQueueWithoutPollers",
    "SettledBulkheadSaturated",
    "SettledOutcomeSlowerThanObjective",
    "SettledApiUnavailable",
    "SettledApiThrottling",
}


def _promtool() -> str:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("no promtool: `make prometheus` installs Debian's (apt-get install prometheus)")
    return binary


def _alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_finds_the_rules_valid() -> None:
    checked = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_every_alert_fires_and_stays_quiet_as_its_promtool_cases_say() -> None:
    cases = RULES.with_name("settled.rules.test.yml")
    tested = subprocess.run(
        [_promtool(), "test", "rules", cases.name], cwd=cases.parent, capture_output=True, text=True
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Each alert has a case in which it fires, and one in which it does not.
    written = yaml.safe_load(cases.read_text())["tests"]
    checks = [check for case in written for check in case.get("alert_rule_test", [])]
    for name in ALERTS:
        mine = [check for check in checks if check["alertname"] == name]
        assert any(check["exp_alerts"] for check in mine), f"{name} is never shown firing"
        assert any(not check["exp_alerts"] for check in mine), f"{name} is never shown quiet"


def test_every_alert_says_how_bad_what_it_means_and_where_its_runbook_is() -> None:
    alerts = _alerts()
    assert {rule["alert"] for rule in alerts} == ALERTS
    runbook = RUNBOOK.read_text()
    for rule in alerts:
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), name
        assert len(rule["annotations"]["summary"]) > 40, name
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/operations.md" and anchor == name.lower(), name
        section = runbook.split(f"\n### {name}\n", 1)
        assert len(section) == 2, f"no runbook section for {name}"
        body = section[1].split("\n### ", 1)[0]
        assert "**What it means for callers.**" in body and "**What to do.**" in body, name


def test_the_production_waits_are_in_the_shipped_file() -> None:
    """Only the end-to-end test shortens `for:`, in a copy of its own: the file keeps minutes."""
    waits = [rule.get("for") for rule in _alerts()]
    assert all(wait is None or re.fullmatch(r"[1-9]\d*m", wait) for wait in waits), waits
