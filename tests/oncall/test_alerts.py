"""A real Prometheus scrapes a real stack and evaluates the shipped rules: a write whose answer was lost
and whose lookups fail stays unknown past `attention_after_s`, the attention alert fires (read from
Prometheus's own alerts API) and resolves once a lookup confirms the action; the lookups-stopped
alert fires when automatic lookups give up."""

from typing import Any

import httpx

from settled.runtime.stack import Stack
from tests.helpers import REFUND, Sandbox, create, new_id, status, wait_for, wait_state
from tests.oncall.conftest import RUNBOOK, Prometheus, reconciled, stops_counted

ATTENTION = "SettledActionsNeedAttention"
STOPPED = "SettledLookupsStopped"


def _firing(prometheus: Prometheus, name: str, kind: str) -> dict[str, Any] | None:
    found = [a for a in prometheus.alerts(name) if a["labels"].get("kind") == kind and a["state"] == "firing"]
    return found[0] if found else None


def test_an_unknown_action_past_its_attention_time_fires_the_alert_until_a_lookup_confirms_it(
    oncall_stack: Stack, oncall_api: httpx.Client, oncall_sandbox: Sandbox, prometheus: Prometheus
) -> None:
    assert not prometheus.alerts(ATTENTION)  # nothing needs attention yet
    op, stops = new_id(), stops_counted(prometheus)
    oncall_sandbox.fault("refunds", "create", "drop_after_apply", op)
    oncall_sandbox.fault("refunds", "lookup", "fail_before_apply", op, count=0)
    assert create(oncall_api, "refund", REFUND, operation_id=op).status_code in (200, 201, 202)
    wait_state(oncall_api, op, "unknown")

    alert = wait_for(lambda: _firing(prometheus, ATTENTION, "refund"), 120, "the attention alert to fire")
    action = status(oncall_api, op)
    assert action["state"] == "unknown" and action["needs_attention"], action
    assert alert["labels"] == {
        "alertname": ATTENTION,
        "kind": "refund",
        "tenant": "-",  # no API keys: the one tenant
        "severity": "critical",
    }
    assert alert["annotations"]["summary"].startswith("1 refund action(s) of tenant - are still not verified")
    anchor = alert["annotations"]["runbook_url"].partition("#")[2]
    assert f"### {ATTENTION}" in RUNBOOK.read_text() and anchor == ATTENTION.lower()
    # The lookups kept failing: they show as inconclusive verdicts, and automatic ones stop after 6 s.
    wait_for(lambda: stops_counted(prometheus) > stops, 120, "this refund's automatic lookups to stop")
    wait_for(lambda: _firing(prometheus, STOPPED, "refund"), 120, "the lookups-stopped alert to fire")
    lookups = prometheus.query(
        'kind_result:settled_reconciliation_lookups:rate5m{kind="refund",result="inconclusive"}'
    )
    assert lookups and float(lookups[0]["value"][1]) > 0, lookups
    assert _firing(prometheus, ATTENTION, "refund") is not None  # still unknown, still flagged

    oncall_sandbox.clear_faults()
    confirmed = wait_for(lambda: reconciled(oncall_api, op), 60, "a reconcile to confirm the refund")
    assert not confirmed["needs_attention"]
    assert len(oncall_sandbox.writes(op)) == 1  # verified by a lookup, never re-sent

    def resolved() -> bool:
        # Resolved, not merely unscraped: the gauge is there, and it is 0.
        gauge = prometheus.query('kind_tenant:settled_actions_needing_attention:max{kind="refund"}')
        return bool(gauge) and float(gauge[0]["value"][1]) == 0 and not prometheus.alerts(ATTENTION)

    wait_for(resolved, 120, "the attention alert to resolve")
