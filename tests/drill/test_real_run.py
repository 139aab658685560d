"""Small real drills on a running stack: the matrix through both arms, and `--target-kind` with the
sandbox standing in for a service of one's own. Ground truth is checked again, straight from the
sandbox, apart from what the drill computed."""

import json
from pathlib import Path

from rich.console import Console
from settled.drill.cli import drill, exit_code
from settled.drill.plan import CUTS, Options

from settled.runtime.stack import Stack
from tests.drill.builders import CONTRACT_METRICS
from tests.helpers import Sandbox

FALSE_OR_DUPLICATE = ("duplicate_writes", "false_done", "false_not_done")
MY_SERVICE = """\
[kinds.room_booking]
description = "reserve the meeting room"
requires_authorization = true
params_schema = { type = "object", required = ["room", "day"], properties = { room = { type = "string" }, \
day = { type = "string" } } }
dispatch = { method = "POST", url = "@URL@/bookings" }
lookup = { method = "GET", url = "@URL@/bookings/by-key/{operation_id}", authoritative = true }
compensate = { method = "POST", url = "@URL@/bookings/{business_ref}/cancel" }
idempotency_header = "Idempotency-Key"
operation_field = "client_reference"
timeout_s = 2.0
commit_horizon_s = 4.0
reconcile_initial_interval_s = 0.5
reconcile_max_interval_s = 1.0
"""


def options(out: Path, cuts: list[str], **extra: object) -> Options:
    base: dict[str, object] = {
        "out": out,
        "seeds": 1,
        "cuts": [CUTS[cut] for cut in cuts],
        "arms": ["transcript", "state"],
        "concurrency": 4,
        "api_url": None,
        "sandbox_url": None,
        "target_kind": None,
        "config": None,
        "params": None,
        "changed_params": None,
    }
    return Options(**{**base, **extra})  # type: ignore[arg-type]


async def test_c2_costs_the_transcript_arm_and_not_the_state_arm(
    stack: Stack, sandbox: Sandbox, tmp_path: Path
) -> None:
    wanted = options(tmp_path, ["C0", "C2", "C7"], api_url=stack.api_url, sandbox_url=stack.sandbox_url)
    built = await drill(wanted, Console(quiet=True))

    written = json.loads((tmp_path / "results.json").read_text())
    assert written == json.loads(json.dumps(built))
    assert set(written) == {"arms", "cuts", "seeds", "summary", "runs"}
    cuts = ["C0", "C2", "C7"]
    assert (written["arms"], written["cuts"], written["seeds"]) == (["transcript", "state"], cuts, 1)
    assert {(arm, cut) for arm in written["summary"] for cut in written["summary"][arm]} == {
        (arm, cut) for arm in ("transcript", "state") for cut in cuts
    }
    for cuts in written["summary"].values():
        for metrics in cuts.values():
            assert set(metrics) >= CONTRACT_METRICS
    assert len(written["runs"]) == 12 and not [run["error"] for run in written["runs"] if run["error"]]
    assert (tmp_path / "report.md").read_text().startswith("# settled drill")
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"

    transcript, state = written["summary"]["transcript"]["C2"], written["summary"]["state"]
    assert sum(transcript[name] for name in FALSE_OR_DUPLICATE) > 0
    assert all(metrics[name] == 0 for metrics in state.values() for name in FALSE_OR_DUPLICATE)
    assert exit_code(built) == 0

    for run in written["runs"]:  # the sandbox agrees with the drill's reading of it
        records = sandbox.records(run["task_id"])
        assert len(records) == len(run["truth"]["records"])
        if run["arm"] == "state" or run["cut"] == "C0":
            assert len(records) == 1, run["task_id"]  # C7 too: a 404 before the late commit changed nothing
        elif run["cut"] == "C2":
            assert len(records) == 2, run["task_id"]


async def test_target_mode_drills_ones_own_service_through_the_fault_proxy(
    stack: Stack, sandbox: Sandbox, tmp_path: Path
) -> None:
    config = tmp_path / "my-kinds.toml"
    config.write_text(MY_SERVICE.replace("@URL@", stack.sandbox_url))
    wanted = options(
        tmp_path / "out",
        ["C0", "C2", "C5", "C7"],
        seeds=2,
        arms=["state"],
        target_kind="room_booking",
        config=config,
        params={"room": "Ada", "day": "Monday"},
        changed_params={"room": "Ada", "day": "Tuesday"},
    )
    built = await drill(wanted, Console(quiet=True))
    assert not [run["error"] for run in built["runs"] if run["error"]]
    assert exit_code(built) == 0
    lost = built["summary"]["state"]["C2"]
    assert lost["attempts"] == 2  # one write per run: never re-sent blindly
    # The send's own call looked the write up at once: nothing false was said, and the truth came.
    assert lost["false_done"] == lost["false_not_done"] == lost["truth_not_reached"] == 0

    for run in built["runs"]:  # what the drill read through the lookup URL is what the sandbox holds
        records = sandbox.records(run["task_id"])
        seen = run["truth"]["records"]
        assert [r["id"] for r in records] == [r["id"] for r in seen], run["task_id"]
        if run["variant"] == "before_commit":
            assert records == []
        if run["variant"] == "after_commit":
            assert records[0]["status"] == "cancelled" and seen[0]["cancelled_at"] is not None
        if run["cut"] in ("C0", "C2", "C7"):
            assert [r["status"] for r in records] == ["booked"]
