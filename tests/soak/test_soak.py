"""The soak's short setting in CI: its own stack, 100 concurrent actions under random faults and
channel events, and not one violation (the long setting is in docs/testing.md, "The soak")."""

from pathlib import Path

import pytest
from settled.sandbox.truth import Observation, judge
from settled.soak.run import SoakConfig, run_soak, summary

pytestmark = pytest.mark.timeout(240)


def test_a_short_soak_has_no_false_claim_no_duplicate_and_every_action_settled(tmp_path: Path) -> None:
    config = SoakConfig(
        actions=100, concurrency=100, duration_s=15, seed=6, data_dir=tmp_path / "stack", progress=False
    )
    report = run_soak(config, say=lambda line: None)
    print(summary(report))
    assert report["violations"] == []
    assert report["records"] > 0 and report["faults_fired_total"] > 0
    # Writes that land after the client gave up, unseen by lookups until then, did happen.
    assert report["faults_fired"].get("create:late_commit", 0) > 0
    assert report["claims"].get("done", 0) > 0 and report["claims"].get("not_done", 0) > 0
    assert set(report["final_states"]) <= {"confirmed", "failed", "cancelled", "cancelled (compensated)"}


def _row(op: str, committed: str, cancelled: str | None = None) -> dict:
    return {"service": "bookings", "id": "b-1", "key": op, "client_reference": op,
            "created_at": committed, "committed_at": committed, "cancelled_at": cancelled}  # fmt: skip


def _seen(op: str, claim: str, sent: float, received: float, ref: str | None = "b-1") -> Observation:
    state = {"done": "confirmed", "not_done": "cancelled", "unknown": "unknown"}[claim]
    status = {"operation_id": op, "state": state, "claim": claim, "business_ref": ref}
    return Observation.of(status, sent, received, "get")


def test_the_judge_catches_each_kind_of_lie() -> None:
    # 2026-01-01T00:00:10Z is 1767225610 seconds after the epoch.
    t = 1767225610.0
    rows = [_row("op-1", "2026-01-01T00:00:10.000000Z"), _row("op-2", "2026-01-01T00:00:10.000000Z")]
    rows.append({**rows[1], "id": "b-2"})
    final = [{"operation_id": "op-1", "state": "confirmed", "business_ref": "b-1"}]
    seen = [
        _seen("op-1", "done", t - 2, t - 1),  # before the commit: false
        _seen("op-1", "done", t + 1, t + 2),  # after: true
        _seen("op-1", "not_done", t + 1, t + 2),  # while it stood: false
        _seen("op-1", "not_done", t - 2, t - 1),  # before it existed: true
        _seen("op-1", "unknown", t - 2, t + 2),  # claims nothing
    ]
    verdict = judge(seen, final, rows, ["op-1", "op-2"])
    kinds = sorted(v.kind for v in verdict.violations)
    assert kinds == ["duplicate", "false_done", "false_not_done"]
    reversed_ = [_row("op-1", "2026-01-01T00:00:10.000000Z", cancelled="2026-01-01T00:00:12.000000Z")]
    final = [{"operation_id": "op-1", "state": "confirmed", "business_ref": "b-1"}]
    assert [v.kind for v in judge([], final, reversed_).violations] == ["final_mismatch"]
    compensated = [{"operation_id": "op-1", "state": "cancelled", "compensated": True}]
    assert judge([_seen("op-1", "not_done", t + 3, t + 4)], compensated, reversed_).ok
    assert [v.kind for v in judge([], [{"operation_id": "op-1", "state": "unknown"}], []).violations] == [
        "unsettled"
    ]
