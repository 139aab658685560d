"""The command's options and the shape of results.json (docs/reference.md)."""

import argparse

import pytest
from settled.drill.cli import exit_code
from settled.drill.plan import UsageError, add_arguments, parse_options
from settled.drill.results import RunMetrics, RunResult, build, state_failures
from settled.drill.timeline import Timeline
from settled.sandbox.truth import GroundTruth

from tests.drill.builders import CONTRACT_METRICS, at


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_defaults_drill_both_arms_on_every_cut() -> None:
    options = parse_options(parse())
    assert options.arms == ["transcript", "state"]
    assert [cut.id for cut in options.cuts] == ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]
    assert options.seeds >= 1 and options.api_url is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arms", "transcript,llm"], "--arms"),
        (["--seeds", "0"], "at least 1"),
        (["--api-url", "http://x"], "go together"),
        (["--target-kind", "refund"], "--config"),
        (["--target-kind", "refund", "--config", "k.toml", "--arms", "transcript,state"], "state arm only"),
        (
            [
                "--target-kind",
                "refund",
                "--config",
                "k.toml",
                "--api-url",
                "http://a",
                "--sandbox-url",
                "http://b",
            ],
            "own stack",
        ),
        (["--config", "k.toml"], "belong to --target-kind"),
        (["--target-kind", "refund", "--config", "k.toml", "--params", "[1]"], "JSON object"),
        (["--cuts", "C8"], "unknown cut"),
    ],
)
def test_impossible_combinations_are_refused_with_a_reason(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_options(parse(*argv))


def test_target_mode_drills_the_state_arm() -> None:
    options = parse_options(parse("--target-kind", "refund", "--config", "k.toml", "--params", '{"a": 1}'))
    assert options.arms == ["state"] and options.params == {"a": 1}


def _run(arm: str, cut: str, **counts: int) -> RunResult:
    return RunResult(
        arm=arm,
        cut=cut,
        seed=1,
        kind="refund",
        task_id=f"t-{arm}-{cut}",
        conversation_id="c",
        variant=None,
        started_at=at(0),
        duration_ms=1.0,
        metrics=RunMetrics(**counts),
        timeline=Timeline(),
        truth=GroundTruth(),
    )


def test_results_have_the_contract_shape_and_a_false_state_claim_fails_the_drill() -> None:
    runs = [
        _run("transcript", "C2", duplicate_writes=1),
        _run("state", "C2"),
        _run("state", "C0", false_done=1),
    ]
    results = build(["transcript", "state"], ["C0", "C2"], 1, runs)
    assert set(results) == {"arms", "cuts", "seeds", "summary", "runs"}
    assert (results["arms"], results["cuts"], results["seeds"]) == (["transcript", "state"], ["C0", "C2"], 1)
    for arm in results["arms"]:
        for cut in results["cuts"]:
            assert set(results["summary"][arm][cut]) >= CONTRACT_METRICS
    assert results["summary"]["transcript"]["C2"]["duplicate_writes"] == 1
    assert state_failures(results) == ["C0: false_done=1"]
    assert exit_code(results) == 1
    assert exit_code(build(["state"], ["C2"], 1, [_run("state", "C2")])) == 0
