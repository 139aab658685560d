"""Metrics of the API and the worker are scrapeable and carry the named series; logs are JSON with ids."""

import json

import httpx

from settled.stack import Stack
from tests.helpers import BOOKING, create, wait_for


def test_api_and_worker_metrics_expose_the_named_series(api: httpx.Client, stack: Stack) -> None:
    op = create(api, "room_booking", BOOKING, authorized=True, wait=10).json()["operation_id"]
    api.get(f"/v1/actions/{op}")
    text = api.get("/metrics").text
    assert 'settled_api_requests_total{method="GET",route="/v1/actions/{operation_id}",status="200"}' in text
    assert "settled_api_request_seconds_bucket" in text

    def worker_series() -> str | None:
        body = httpx.get(stack.worker_metrics_url, timeout=5).text
        wanted = (
            "settled_action_transitions_total",
            "settled_dispatches_total",
            "temporal_workflow_completed",
        )
        return body if all(name in body for name in wanted[:2]) else None

    body = wait_for(worker_series, what="the worker's settled series")
    assert 'state="confirmed"' in body and "temporal_" in body


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
