"""The drill's metrics (docs/reference.md): one run's counts from its timeline and its ground truth, and the
summary over the runs of one arm and cut. Pure functions.

A claim is judged against the truth at the moment it was made: "done" is true only while an applied,
not-cancelled record stands; "not_done" only while none does.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from settled.drill.timeline import DEFINITIVE, Timeline, Utterance
from settled.sandbox.truth import GroundTruth

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
