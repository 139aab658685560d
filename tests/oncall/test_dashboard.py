"""Every query of the shipped Grafana dashboard returns data from a real Prometheus scraping a real
stack, after traffic of every kind (evaluated through Prometheus's `/api/v1/query`)."""

import json
import math
from typing import Any

from settled.workflows.meters import OUTCOME_BUCKETS_S

from tests.helpers import wait_for
from tests.oncall.conftest import DASHBOARD, Prometheus, Traffic

# What Grafana puts in for its variables: every kind, and a window Prometheus has samples in.
VARIABLES = {"$kind": ".+", "$__rate_interval": "5m"}


def _targets() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"]))
    return found


def _evaluated(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def test_the_dashboard_imports_with_its_data_source_and_panels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [entry["name"] for entry in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    titles = [panel["title"] for panel in dashboard["panels"] if panel["type"] != "row"]
    assert len(titles) == len(set(titles)) >= 12
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
            assert panel["targets"], panel["title"]


def test_every_panel_query_returns_data_from_the_scrape(prometheus: Prometheus, traffic: Traffic) -> None:
    def numbers(result: list[dict[str, Any]]) -> list[float]:
        return [float(sample["value"][1]) for sample in result if not math.isnan(float(sample["value"][1]))]

    for title, expr in _targets():
        query = _evaluated(expr)
        wait_for(lambda q=query: numbers(prometheus.query(q)), 120, f"data for {title!r}: {query}")


def test_a_histogram_has_one_set_of_buckets_across_the_api_and_the_worker(
    prometheus: Prometheus, traffic: Traffic
) -> None:
    """The API and the worker spell bucket bounds differently (1.0, 1); the example configuration's
    relabelling makes them one, or a quantile over both would be wrong."""
    bounds = prometheus.query("count by (le) (settled_action_outcome_seconds_bucket)")
    assert sorted(float(sample["metric"]["le"]) for sample in bounds) == [*OUTCOME_BUCKETS_S, math.inf]
    # Stored as the SDK writes them (1, 2.5), whoever wrote them.
    assert {sample["metric"]["le"] for sample in bounds} >= {"1", "2.5", "86400", "+Inf"}
