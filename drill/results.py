"""What a drill found (docs/reference.md): each run's result, its metrics from its timeline and its
ground truth, the summary over the runs of one arm and cut, and results.json:
{"arms", "cuts", "seeds", "summary": {ARM: {CUT: METRICS}}, "runs"}.

A claim is judged against the truth at the moment it was made (`sandbox.truth`): "done" is true only
while an applied, not-cancelled record stands; "not_done" only while none does. Pure functions,
but for writing results.json.
"""

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from settled.drill.plan import CUTS
from settled.drill.timeline import DEFINITIVE, Timeline, Utterance
from settled.sandbox.truth import GroundTruth

# -- one run ---------------------------------------------------------------------------------------

CONSENTS = ("consent", "go_ahead")
WISHES = ("request", "change", "consent", "go_ahead")


class RunMetrics(BaseModel):
    attempts: int = 0
    duplicate_writes: int = 0
    false_done: int = 0
    false_not_done: int = 0
    honest_unknown: int = 0
    unnecessary_prompts: int = 0
    missed_reauthorization: int = 0
    time_to_truth_ms: float | None = None
    asked: bool = False  # the customer asked "did you do it?" in text
    premature_done: int = 0  # false "done" claims made before a record that did appear later
    first_words_ms: float | None = None  # consent turn heard -> first assistant words
    write_latency_ms: list[float] = Field(default_factory=list)


class RunResult(BaseModel):
    """One run: its scenario, what was said (the timeline), the ground truth, and the metrics of both."""

    arm: str
    cut: str
    seed: int
    kind: str
    task_id: str
    conversation_id: str
    variant: str | None
    started_at: datetime
    duration_ms: float
    error: str | None = None
    notes: list[str] = Field(default_factory=list)
    metrics: RunMetrics
    timeline: Timeline
    truth: GroundTruth


def same_params(consented: dict[str, Any] | None, written: dict[str, Any]) -> bool:
    """A write matches a consent when every consented field has the consented value (the write may
    carry more fields, such as a client reference)."""
    if consented is None:
        return False
    return all(written.get(name) == value for name, value in consented.items())


def _latest(utterances: Iterable[Utterance], intents: Sequence[str], at: datetime) -> Utterance | None:
    found = None
    for utterance in utterances:
        if utterance.intent in intents and utterance.at <= at:
            found = utterance
    return found


def _unnecessary(prompt: Utterance, timeline: Timeline) -> bool:
    """A go-ahead asked for although the customer's latest consent, for the params they want now, had
    been given and recorded."""
    customer = timeline.said_by("customer")
    consent = _latest(customer, CONSENTS, prompt.at)
    wish = _latest(customer, WISHES, prompt.at)
    if consent is None or wish is None or not same_params(wish.params, consent.params or {}):
        return False
    return any(
        mark.name == "consent_recorded"
        and consent.at <= mark.at <= prompt.at
        and same_params(consent.params, mark.params or {})
        for mark in timeline.marks
    )


def _time_to_truth(timeline: Timeline, truth: GroundTruth) -> tuple[bool, float | None]:
    asks = [u for u in timeline.said_by("customer", "text") if u.intent == "ask"]
    if not asks:
        return False, None
    asked_at = asks[0].at
    for answer in timeline.said_by("assistant", "text"):
        if answer.at < asked_at or answer.claim not in DEFINITIVE:
            continue
        if truth.claim_is_true(answer.claim, answer.at):
            return True, (answer.at - asked_at).total_seconds() * 1000
    return True, None


def _first_words(timeline: Timeline) -> float | None:
    turn_end = timeline.first_mark("consent_turn_end")
    if turn_end is None:
        return None
    spoken = [u for u in timeline.said_by("assistant", "voice") if u.at >= turn_end.at]
    return (spoken[0].at - turn_end.at).total_seconds() * 1000 if spoken else None


def measure(timeline: Timeline, truth: GroundTruth) -> RunMetrics:
    metrics = RunMetrics(
        attempts=len(truth.writes),
        duplicate_writes=max(len(truth.records) - 1, 0),
        first_words_ms=_first_words(timeline),
        write_latency_ms=[sample.ms for sample in timeline.samples if sample.name == "write"],
    )
    for said in timeline.said_by("assistant"):
        if said.claim == "done" and not truth.standing_at(said.at):
            metrics.false_done += 1
            metrics.premature_done += truth.appears_after(said.at)
        elif said.claim == "not_done" and truth.standing_at(said.at):
            metrics.false_not_done += 1
        elif said.claim == "unknown":
            metrics.honest_unknown += 1
        elif said.claim == "prompt" and _unnecessary(said, timeline):
            metrics.unnecessary_prompts += 1
    customer = timeline.said_by("customer")
    for record in truth.records:
        consent = _latest(customer, CONSENTS, record.committed_at)
        if consent is None or not same_params(consent.params, record.payload):
            metrics.missed_reauthorization += 1
    metrics.asked, metrics.time_to_truth_ms = _time_to_truth(timeline, truth)
    return metrics


# -- over the runs of one arm and cut --------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


COUNTS = (
    "attempts",
    "duplicate_writes",
    "false_done",
    "false_not_done",
    "honest_unknown",
    "unnecessary_prompts",
    "missed_reauthorization",
    "premature_done",
)


def summarize(runs: Sequence[RunMetrics]) -> dict[str, Any]:
    """The METRICS object of one arm and cut: counts summed over runs, times as p50/p95 over runs."""
    summary: dict[str, Any] = {name: sum(getattr(run, name) for run in runs) for name in COUNTS}
    truths = [run.time_to_truth_ms for run in runs if run.time_to_truth_ms is not None]
    firsts = [run.first_words_ms for run in runs if run.first_words_ms is not None]
    writes = [ms for run in runs for ms in run.write_latency_ms]
    for name, values in (
        ("time_to_truth_ms", truths),
        ("first_words_ms", firsts),
        ("write_latency_ms", writes),
    ):
        summary[f"{name}_p50"] = _rounded(percentile(values, 0.5))
        summary[f"{name}_p95"] = _rounded(percentile(values, 0.95))
    summary["truth_not_reached"] = sum(run.asked and run.time_to_truth_ms is None for run in runs)
    summary["runs"] = len(runs)
    return summary


# -- results.json ----------------------------------------------------------------------------------

FALSE_OR_DUPLICATE = ("duplicate_writes", "false_done", "false_not_done")


def build(arms: list[str], cuts: list[str], seeds: int, runs: list[RunResult]) -> dict[str, Any]:
    summary: dict[str, dict[str, Any]] = {}
    for arm in arms:
        summary[arm] = {}
        for cut in cuts:
            mine = [run for run in runs if run.arm == arm and run.cut == cut]
            summary[arm][cut] = {
                **summarize([run.metrics for run in mine]),
                "errors": sum(run.error is not None for run in mine),
            }
    return {
        "arms": arms,
        "cuts": cuts,
        "seeds": seeds,
        "summary": summary,
        "runs": [run.model_dump(mode="json") for run in runs],
    }


def state_failures(results: dict[str, Any]) -> list[str]:
    """Every cut where the state arm made a duplicate write or a false claim."""
    failures = []
    for cut, metrics in results["summary"].get("state", {}).items():
        found = {name: metrics[name] for name in FALSE_OR_DUPLICATE if metrics[name]}
        if found:
            failures.append(f"{cut}: " + ", ".join(f"{name}={count}" for name, count in found.items()))
    return failures


def errored(results: dict[str, Any]) -> list[str]:
    return [f"{run['task_id']}: {run['error']}" for run in results["runs"] if run["error"]]


def _quantiles(samples: list[float]) -> tuple[float | None, float | None]:
    found = percentile(samples, 0.5), percentile(samples, 0.95)
    return tuple(None if value is None else round(value, 1) for value in found)  # type: ignore[return-value]


def latency(results: dict[str, Any], arm: str) -> dict[str, float | None]:
    """One arm's write latency and time to first words, p50/p95 (ms), over the cuts without a fault
    (a held or failed write measures the fault, not the path)."""
    runs = [run for run in results["runs"] if run["arm"] == arm and CUTS[run["cut"]].fault is None]
    writes = [ms for run in runs for ms in run["metrics"]["write_latency_ms"]]
    firsts = [
        run["metrics"]["first_words_ms"] for run in runs if run["metrics"]["first_words_ms"] is not None
    ]
    values: dict[str, float | None] = {}
    for name, samples in (("write_latency_ms", writes), ("first_words_ms", firsts)):
        values[f"{name}_p50"], values[f"{name}_p95"] = _quantiles(samples)
    return values


def api_latency(results: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per settled API route, over every run of the state arm: calls, p50, p95 and max (ms)."""
    by_route: dict[str, list[float]] = {}
    for run in results["runs"]:
        for sample in run["timeline"]["samples"]:
            if sample["name"] == "api":
                by_route.setdefault(sample["label"], []).append(sample["ms"])
    table = {}
    for route, samples in sorted(by_route.items()):
        p50, p95 = _quantiles(samples)
        table[route] = {"calls": len(samples), "p50": p50, "p95": p95, "max": round(max(samples), 1)}
    return table


def write(out: Path, results: dict[str, Any]) -> Path:
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path
