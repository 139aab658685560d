"""A stack of the on-call tests' own, and a real Prometheus (Debian's binary) scraping it every second
and evaluating the shipped rules (with their `for:` durations shortened) every second."""

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from settled.domain.kinds import PLAIN_REFUND_PARAMS, Variant
from settled.runtime.stack import Stack, free_port
from tests.helpers import (
    BOOKING,
    FAST,
    REFUND,
    TEST_KINDS,
    Sandbox,
    api_client,
    create,
    new_id,
    sandbox_of,
    status,
    wait_for,
    wait_state,
)

REPOSITORY = Path(__file__).resolve().parents[2]
RULES = REPOSITORY / "deploy" / "prometheus" / "settled.rules.yml"
EXAMPLE_CONFIG = RULES.with_name("prometheus.example.yml")
DASHBOARD = REPOSITORY / "deploy" / "grafana" / "settled.json"
RUNBOOK = REPOSITORY / "docs" / "operations.md"

# A booking service that answers, with an objective; a refund service without deduplication (a lost
# answer is only ever looked up), whose actions need attention after 3 s and whose automatic lookups
# stop after 6 s.
KINDS: dict[str, Variant] = {
    "room_booking": TEST_KINDS["room_booking"].but(attention_after_s=3.0, outcome_objective_s=60.0),
    "refund": Variant(
        "refund",
        {
            **FAST,
            "requires_authorization": None,
            "params_schema": PLAIN_REFUND_PARAMS,
            "idempotency_header": None,
            "say": None,
            "attention_after_s": 3.0,
            "give_up_after_s": 6.0,
            # Its faults answer at once; a slow answer on a busy machine must not make a lookup that
            # would confirm it inconclusive (its lookups stop 6 s after a /reconcile too).
            "timeout_s": 10.0,
        },
    ),
}


@pytest.fixture(scope="package")
def oncall_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack.on_free_ports(tmp_path_factory.mktemp("oncall"), KINDS, ui=False).running() as stack:
        yield stack


@pytest.fixture(scope="package")
def oncall_api(oncall_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(oncall_stack) as client:
        yield client


@pytest.fixture(scope="package")
def oncall_sandbox(oncall_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(oncall_stack) as truth:
        yield truth


def testable_rules(into: Path) -> Path:
    """The shipped rules with every `for:` shortened to nothing: what fires after minutes in
    production fires at the next evaluation here. Nothing else changes."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
    path = into / "settled.rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


class Prometheus:
    """A Prometheus server of the test's own, read through its HTTP API."""

    def __init__(self, stack: Stack, home: Path) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail(
                "no prometheus binary: `make prometheus` installs Debian's (apt-get install prometheus)"
            )
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        # The shipped example, with this stack's targets, the rules' testable copy and 1 s intervals.
        config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
        config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(testable_rules(home))]
        ports = {"settled-api": stack.ports.api, "settled-worker": stack.ports.worker_metrics}
        for job in config["scrape_configs"]:
            job["static_configs"] = [{"targets": [f"127.0.0.1:{ports[job['job_name']]}"]}]
        (home / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = home / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={home / 'prometheus.yml'}",
                    f"--storage.tsdb.path={home / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for(self._ready, 60, "Prometheus to be ready")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.log.read_text()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _get(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.url}{path}", params=params, timeout=10)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector `expr` evaluates to now."""
        data = self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return data["result"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The alerts of this name that Prometheus holds now (pending or firing)."""
        return [
            alert for alert in self._get("/api/v1/alerts")["alerts"] if alert["labels"]["alertname"] == name
        ]

    def targets_up(self) -> bool:
        active = self._get("/api/v1/targets")["activeTargets"]
        return len(active) == 2 and all(target["health"] == "up" for target in active)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="package")
def prometheus(oncall_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(oncall_stack, tmp_path_factory.mktemp("prometheus"))
    try:
        wait_for(server.targets_up, 60, "Prometheus to scrape the API and the worker")
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Traffic:
    """What the traffic did: the ids it used (which no series may carry)."""

    ids: tuple[str, ...]


def reconciled(api: httpx.Client, operation_id: str) -> dict[str, Any] | None:
    """Ask for a lookup, as an operator does, and wait a little for it: the action if it is confirmed.
    A reconcile within a second of the last lookup is answered without another (it was just looked
    up), so the caller asks again."""
    answer = api.post(f"/v1/actions/{operation_id}/reconcile", params={"wait": 5})
    assert answer.status_code == 200, answer.text
    action: dict[str, Any] = answer.json()
    return action if action["state"] == "confirmed" else None


def stops_counted(prometheus: Prometheus) -> float:
    """How many times automatic lookups of refunds stopped, as Prometheus has scraped it."""
    counted = prometheus.query('sum(settled_reconciliation_stopped_total{kind="refund"})')
    return float(counted[0]["value"][1]) if counted else 0.0


def _one_round(api: httpx.Client, sandbox: Sandbox, prometheus: Prometheus) -> list[str]:
    """Bookings confirmed, a booking refused, a refund whose answer is lost and whose lookups fail
    until they stop, then verified by a lookup, and a read of an action that does not exist."""
    conversation = new_id("conv")
    confirmed = [new_id() for _ in range(2)]
    for op in confirmed:
        create(api, "room_booking", BOOKING, authorized=True, operation_id=op, conversation_id=conversation)
        wait_state(api, op, "confirmed")
    refused = new_id()
    sandbox.fault("bookings", "create", "reject", refused)
    create(api, "room_booking", BOOKING, authorized=True, operation_id=refused, conversation_id=conversation)
    wait_state(api, refused, "failed")
    lost, stops = new_id(), stops_counted(prometheus)
    sandbox.fault("refunds", "create", "drop_after_apply", lost)
    sandbox.fault("refunds", "lookup", "fail_before_apply", lost, count=0)
    create(api, "refund", REFUND, operation_id=lost, conversation_id=conversation)
    wait_for(lambda: status(api, lost)["needs_attention"], 60, "the lost refund to need attention")
    # Its automatic lookups stop 6 s after the first send: then one is asked for, and answered.
    wait_for(lambda: stops_counted(prometheus) > stops, 90, "automatic lookups to stop")
    sandbox.clear_faults()
    wait_for(lambda: reconciled(api, lost), 60, "a reconcile to confirm the lost refund")
    missing = new_id()
    assert api.get(f"/v1/actions/{missing}").status_code == 404
    return [conversation, *confirmed, refused, lost, missing]


@pytest.fixture(scope="package")
def traffic(oncall_api: httpx.Client, oncall_sandbox: Sandbox, prometheus: Prometheus) -> Traffic:
    """Every kind of answer, twice while Prometheus scrapes: a counter appears at its first count,
    and a rate needs it seen before and after a change."""
    ids = _one_round(oncall_api, oncall_sandbox, prometheus)
    wanted = [
        'settled_dispatches_total{kind="room_booking",result="rejected"}',
        'settled_reconciliation_lookups_total{kind="refund",result="inconclusive"}',
        'settled_action_outcome_seconds_count{kind="room_booking",state="failed"}',
        'settled_api_requests_total{status="404"}',
    ]
    for series in wanted:
        wait_for(lambda s=series: prometheus.query(s), 60, f"Prometheus to have scraped {series}")
    ids += _one_round(oncall_api, oncall_sandbox, prometheus)
    return Traffic(ids=tuple(ids))
