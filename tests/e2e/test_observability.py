"""Metrics of the API and the worker are scrapeable and carry the named series; logs are JSON with ids."""

import json

import httpx

from settled.runtime.stack import Stack
from tests.helpers import BOOKING, Sandbox, create, new_id, wait_for, wait_state


def test_api_and_worker_metrics_expose_the_named_series(
    api: httpx.Client, stack: Stack, sandbox: Sandbox
) -> None:
    op = create(api, "room_booking", BOOKING, authorized=True, wait=10).json()["operation_id"]
    lost = new_id()
    sandbox.fault("bookings", "create", "drop_after_apply", lost)
    create(api, "room_booking", BOOKING, operation_id=lost, authorized=True)
    wait_state(api, lost, "confirmed")  # by a lookup
    api.get(f"/v1/actions/{op}")
    text = api.get("/metrics").text
    assert 'settled_api_requests_total{method="GET",route="/v1/actions/{operation_id}",status="200"}' in text
    assert "settled_api_request_seconds_bucket" in text

    def settled_series() -> str | None:
        # New actions' first tasks run in the worker the API hosts: their counters are on the API's
        # /metrics; later tasks and regular activities count in the worker's exporter.
        body = httpx.get(stack.worker_metrics_url, timeout=5).text + api.get("/metrics").text
        wanted = (
            "settled_action_transitions_total",
            "settled_dispatches_total",
            "settled_reconciliation_lookups_total",
        )
        return body if all(name in body for name in wanted) else None

    body = wait_for(settled_series, what="the settled series")
    assert 'state="confirmed"' in body and "temporal_" in body
    hosted = api.get("/metrics").text
    assert any(
        line.startswith("settled_action_transitions_total{") and 'state="confirmed"' in line
        for line in hosted.splitlines()
    ), hosted
    # The API's own worker publishes the SDK's series too, as a `settled worker` process does.
    assert any(line.startswith("temporal_request_total{") for line in hosted.splitlines())
    assert "temporal_workflow_task_execution_latency_bucket{" in hosted
    lookups = [line for line in body.splitlines() if line.startswith("settled_reconciliation_lookups_total{")]
    assert any('kind="room_booking"' in line and 'result="applied"' in line for line in lookups), lookups


def test_logs_are_json_lines_with_operation_ids_and_no_params(api: httpx.Client, stack: Stack) -> None:
    secret_room = "Room-Of-Ada-Lovelace"
    op = create(api, "room_booking", {**BOOKING, "room": secret_room}).json()["operation_id"]
    api.get(f"/v1/actions/{op}")
    log = stack.data_dir / "logs" / "api.log"

    def logged() -> dict | None:
        for line in log.read_text().splitlines():
            if op in line:
                return json.loads(line)
        return None

    entry = wait_for(logged, what="a log line for the operation")
    assert entry["component"] == "api" and "ms" in entry
    assert secret_room not in log.read_text()
