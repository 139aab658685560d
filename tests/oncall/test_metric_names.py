"""Metric hygiene, on the real /metrics of the API and the worker after traffic of every kind: names and
units by Prometheus's conventions, every settled series with exactly its documented labels, and no
label whose values are unbounded (no operation or conversation id anywhere, every value of a known
label from a bounded set)."""

import re

import httpx
from prometheus_client.parser import text_string_to_metric_families

from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.helpers import api_client
from tests.oncall.conftest import KINDS, RUNBOOK, Traffic

# Each settled series, its type and its own labels (docs/reference.md#metrics, docs/operations.md).
SETTLED: dict[str, tuple[str, set[str]]] = {
    "settled_api_requests": ("counter", {"method", "route", "status"}),
    "settled_api_request_seconds": ("histogram", {"method", "route"}),
    "settled_open_actions": ("gauge", {"kind", "state"}),
    "settled_actions_needing_attention": ("gauge", {"kind", "tenant"}),
    "settled_task_queue_pollers": ("gauge", {"task_queue", "task_queue_type"}),
    "settled_task_queue_backlog_tasks": ("gauge", {"task_queue", "task_queue_type"}),
    "settled_task_queue_backlog_age_seconds": ("gauge", {"task_queue", "task_queue_type"}),
    "settled_kind_outcome_objective_seconds": ("gauge", {"kind"}),
    "settled_action_transitions": ("counter", {"kind", "state"}),
    "settled_action_outcome_seconds": ("histogram", {"kind", "state"}),
    "settled_dispatches": ("counter", {"kind", "result"}),
    "settled_reconciliation_lookups": ("counter", {"kind", "result"}),
    "settled_compensations": ("counter", {"kind", "result"}),
    "settled_reconciliation_stopped": ("counter", {"kind"}),
    "settled_shared_lane_in_flight": ("gauge", {"kind"}),
}
# What the Temporal SDK adds to the series counted in workflows and activities: where they ran.
SDK_CONTEXT = {"namespace", "task_queue", "workflow_type", "activity_type", "service_name"}
QUEUES = {"", "settled", *(f"settled-kind-{kind}" for kind in KINDS)}
BOUNDED: dict[str, set[str]] = {
    "kind": set(KINDS),
    "state": {state.value for state in State},
    "tenant": {"-"},
    "task_queue": QUEUES,
    "task_queue_type": {"workflow", "activity"},
    "workflow_type": {"Action", "Conversation"},
    "activity_type": {"dispatch", "lookup", "compensate", "sending"},
    "service_name": {"temporal-core-sdk"},
    "namespace": {"default"},
    "method": {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"},
}
RESULTS = {
    "settled_dispatches": {"confirmed", "pending", "rejected", "not_sent", "unknown", "withdrawn"},
    "settled_reconciliation_lookups": {"applied", "pending", "rejected", "not_applied", "inconclusive"},
    "settled_compensations": {"compensated", "rejected", "unknown"},
}
# Labels that would hold an action's or a conversation's id: never allowed, on any series.
ID_LABELS = {
    "operation_id",
    "operation_key",
    "conversation_id",
    "workflow_id",
    "run_id",
    "activity_id",
    "business_ref",
}
NAME = re.compile(r"[a-z_:][a-z0-9_:]*")


def _scrape(stack: Stack) -> dict[str, str]:
    with api_client(stack) as api:
        served = {
            "api": api.get("/metrics").text,
            "worker": httpx.get(stack.worker_metrics_url, timeout=10).text,
        }
    return served


def test_every_series_is_named_by_the_conventions_and_labelled_with_bounded_values(
    oncall_stack: Stack, traffic: Traffic
) -> None:
    seen: set[str] = set()
    for source, text in _scrape(oncall_stack).items():
        for held in traffic.ids:  # no id a caller chose, anywhere: not in a value, not in a name
            assert held not in text, (source, held)
        for family in text_string_to_metric_families(text):
            name = family.name
            assert NAME.fullmatch(name), (source, name)
            assert not re.search(r"_(ms|millis|milliseconds|minutes|hours)$", name) or name.startswith(
                "temporal_"
            ), name
            for sample in family.samples:
                assert not ID_LABELS & set(sample.labels), (source, sample)
                if family.type == "counter":
                    assert sample.name.endswith(("_total", "_created")), (source, sample.name)
                else:
                    assert not sample.name.endswith("_total"), (source, sample.name)
            if not name.startswith("settled_"):
                continue
            seen.add(name)
            assert name in SETTLED, f"{name} ({source}) is not a documented settled series"
            kind, labels = SETTLED[name]
            assert family.type == kind, (name, family.type)
            if kind == "histogram" or name.endswith("_seconds"):
                assert name.endswith("_seconds"), name  # durations in the base unit
            for sample in family.samples:
                own = set(sample.labels) - {"le"}
                assert labels <= own <= labels | SDK_CONTEXT, (name, sample.labels)
                for label, value in sample.labels.items():
                    if label in BOUNDED:
                        assert value in BOUNDED[label], (name, label, value)
                if name in RESULTS:
                    assert sample.labels["result"] in RESULTS[name], (name, sample.labels)
                if "route" in sample.labels:
                    assert sample.labels["route"] == "unmatched" or sample.labels["route"].startswith("/"), (
                        sample
                    )
                if "status" in sample.labels:
                    assert re.fullmatch(r"[1-5]\d\d", sample.labels["status"]), sample
    # The traffic made every series on call reads (compensations need a cancel, which it did not make).
    assert set(SETTLED) - {"settled_compensations"} <= seen, set(SETTLED) - seen


def test_the_runbook_states_the_cardinality_of_every_settled_series() -> None:
    table = RUNBOOK.read_text().split("## The series and their cardinality", 1)[1]
    for name, (kind, _) in SETTLED.items():
        shown = f"{name}_total" if kind == "counter" else name
        assert f"`{shown}`" in table, name
