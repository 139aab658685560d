"""The benchmark in its tiny setting: it runs from its command line against a stack of its own and
writes a report whose figures come from what it measured (benchmarks are not timed tests: no figure
is judged here, only that each was measured and that nothing was written twice)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


# Every step of the bench on a stack of its own: some two and a half minutes on a shared, loaded machine.
@pytest.mark.timeout(300)
def test_the_tiny_benchmark_runs_and_reports_every_measurement(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    run = subprocess.run(
        [sys.executable, "-m", "settled", "bench", "--tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads((out / "results.json").read_text())
    results = document["results"]
    sizes = document["sizes"]
    assert results["bare_call_ms"]["n"] == results["durable_action_ms"]["n"] == sizes["sequential"]
    assert results["status_read_ms"]["n"] == results["status_read_8_readers_ms"]["n"] == sizes["status_reads"]
    assert results["status_read_under_load_ms"]["n"] > 0
    assert results["interrupt_to_verified_ms"]["n"] == sizes["interrupts"]
    assert set(results["latency_by_concurrency_ms"]) == {str(n) for n in sizes["loads"]}
    throughput = results["throughput"]
    assert throughput["confirmed"] > 0 and throughput["duplicates"] == 0 and throughput["missing"] == 0
    assert results["sandbox_records"]["duplicates"] == 0 and results["sandbox_records"]["total"] > 0
    assert results["memory"]["worker"]["peak_rss_mb"] > 0
    assert results["cpu_ms_per_action"]["temporal"] > 0
    for arm in ("floor", "durable_action_not_deduplicated", "floor_not_deduplicated"):
        assert results[f"{arm}_ms"]["n"] == sizes["sequential"], arm
    for name in ("floor_throughput", "floor_throughput_not_deduplicated"):
        assert results[name]["confirmed"] > 0 and results[name]["cpu_ms_per_action"]["temporal"] > 0
    assert set(results["vs_floor"]) == {
        "overhead_p50", "overhead_p95", "overhead_p99", "overhead_not_deduplicated_p50",
        "overhead_not_deduplicated_p95", "overhead_not_deduplicated_p99", "throughput",
        "caller_burst_last_confirmed",
    }  # fmt: skip
    burst = results["caller_burst"]
    n = sizes["caller_burst"]
    assert burst["settled"]["actions"] == burst["floor"]["actions"] == n
    assert burst["settled"]["accepted"] == burst["settled"]["records"] == n
    assert burst["settled"]["final_states"] == {"confirmed": n} and burst["settled"]["duplicates"] == 0
    # The engine's cost, counted in the histories: every confirmed action ran its own execution.
    for cost in (results["engine_cost"], burst["engine_cost"]):
        assert cost["settled"]["action"]["executions"] == cost["floor"]["total"]["executions"] == 1
        assert cost["settled"]["action"]["workflow_tasks"] >= 1 and cost["floor"]["total"]["events"] > 0
    # In a conversation its channel opened, the actions share that conversation's one execution.
    in_call = results["engine_cost"]["settled_in_opened_conversation"]
    assert in_call["actions"] == sizes["engine_samples"] and in_call["action"]["executions"] == 1
    assert in_call["conversation"]["executions"] == round(1 / sizes["engine_samples"], 2)
    assert in_call["conversation"]["updates"] > 0  # the channel's opening, recorded by the conversation
    # Temporal Cloud's billable Actions: the floor is one workflow started and one local activity; a
    # status read costs none (the memo, no query); every flow of settled is counted.
    billed = results["billable_actions"]
    assert billed["floor"] == {"total": 2, "workflow started": 1, "local activity": 1}
    assert billed["status_read"] == {"total": 0}
    for flow in ("in_live_call", "in_new_conversation", "waiting_for_go_ahead"):
        assert billed[flow]["workflow started"] >= 1 and billed[flow]["total"] > billed["floor"]["total"]
    assert billed["waiting_for_go_ahead"]["update"] >= 1  # the go-ahead
    assert "Temporal Cloud Actions" in (out / "results.md").read_text()
    # A whole call through an adapter session (the tiny setting's one door), per confirmed action, for
    # each shape of kind: the action's own start and a share of its conversation's, the `presented`
    # after the confirmation was spoken, and the minute its history stays open once settled (not the
    # week of late controls: a late control opens it again).
    whole = results["whole_call"]
    shapes = ("local_activity", "activity", "lookup_horizon", "go_ahead")
    assert set(whole) == {f"adapter/{shape}" for shape in shapes}
    for name, row in whole.items():
        billed, stored = row["billed"], row["storage"]
        assert row["actions"] == sizes["calls"] * sizes["call_actions"], name
        assert billed["workflow started"] > 1 and billed["update"] >= 1, (name, billed)
        assert 0 < stored["action_hours_open"] < 1 and stored["gb_hours_per_1000_actions"] > 0, name
    assert whole["adapter/local_activity"]["billed"]["local activity"] == 1
    assert "activity" not in whole["adapter/local_activity"]["billed"]
    assert whole["adapter/activity"]["billed"]["activity"] >= 1
    assert "local activity" not in whole["adapter/activity"]["billed"]
    # The lost answer: the send and the lookup that confirmed it, in one business call.
    lost = whole["adapter/lookup_horizon"]["billed"]
    assert lost.get("activity", 0) + lost.get("local activity", 0) == 1, lost
    assert whole["adapter/go_ahead"]["billed"]["update"] >= 2  # the go-ahead, then the `presented`
    assert "whole call" in (out / "results.md").read_text()
    idle = results["idle_streams"]
    assert idle["streams"] == sizes["idle_streams"] and idle["core_percent"]["api"] >= 0
    assert set(idle["streams_cost_percent"]) == set(idle["baseline_core_percent"]) >= {"api", "temporal"}
    assert "overhead p50 / floor's" in (out / "results.md").read_text()
    assert "targets (docs/performance.md)" in run.stdout
    bulkhead = results["bulkhead"]
    assert bulkhead["alone_ms"]["n"] == bulkhead["beside_ms"]["n"] == sizes["bulkhead_samples"]
    assert bulkhead["alone_confirmed"] == bulkhead["beside_confirmed"] == sizes["bulkhead_samples"]
    assert bulkhead["degraded_duplicates"] == 0


def test_the_bulkhead_step_runs_alone(tmp_path: Path) -> None:
    """`--only bulkhead`: the healthy kind alone and beside a degraded kind's held requests, as a ratio;
    every degraded action is confirmed once its service answers, none written twice."""
    out = tmp_path / "bench"
    run = subprocess.run(
        [sys.executable, "-m", "settled", "bench", "--tiny", "--only", "bulkhead", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads((out / "results.json").read_text())
    bulkhead = document["results"]["bulkhead"]
    sizes = document["sizes"]
    assert bulkhead["alone_ms"]["n"] == bulkhead["beside_ms"]["n"] == sizes["bulkhead_samples"]
    assert bulkhead["alone_confirmed"] == bulkhead["beside_confirmed"] == sizes["bulkhead_samples"]
    assert bulkhead["open_at_service_before"] > 0  # measured while the degraded kind's requests were held
    assert bulkhead["p95_ratio"] is not None
    assert bulkhead["degraded_final_states"] == {"confirmed": sizes["bulkhead_degraded"]}
    assert bulkhead["degraded_records"] == sizes["bulkhead_degraded"] and bulkhead["degraded_duplicates"] == 0
    # What the held kind's actions cost the engine: none ran an update, queued or not.
    cost = bulkhead["degraded_engine_cost"]
    assert cost["actions"] == sizes["bulkhead_degraded"] and cost["total"]["updates"] == 0, cost
    assert "beside / alone" in (out / "results.md").read_text()


def test_the_record_probe_measures_each_shape_of_a_conversations_record() -> None:
    """`python -m settled.bench.records N`: each shape ran N times in each round, on a server of its own,
    and cost that server some CPU."""
    run = subprocess.run(
        [sys.executable, "-m", "settled.bench.records", "20"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(run.stdout)
    assert document["operations"] == 20
    assert len(document["results"]) == 3
    for rounds in document["results"].values():
        assert len(rounds) == 2
        assert all(r["per_second"] > 0 and r["server_cpu_ms"] > 0 for r in rounds)


def test_the_timeline_splits_each_action_by_its_own_history() -> None:
    """`python -m settled.bench.timeline N`: N actions of settled and of the floor, each latency split at
    the start and the confirming task its history recorded, every part measured."""
    run = subprocess.run(
        [sys.executable, "-m", "settled.bench.timeline", "3"], capture_output=True, text=True, timeout=150
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(run.stdout)
    assert document["actions"] == 3
    for arm in ("settled", "floor"):
        parts = document["results"][arm]
        assert set(parts) == {"to_started", "started_to_completed", "completed_to_answer", "total"}
        assert all(part["n"] == 3 for part in parts.values())
        assert parts["started_to_completed"]["p50"] > 0 and parts["total"]["p50"] > 0
