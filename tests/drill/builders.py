"""Hand-made timelines and record sets for the metric tests: times in ms from an arbitrary zero."""

from datetime import UTC, datetime, timedelta
from typing import Any

from settled.drill.timeline import Mark, MarkName, Timeline, Utterance
from settled.sandbox.truth import GroundTruth, Record, Write

ZERO = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
THURSDAY = {"room": "Ada", "day": "Thursday"}
FRIDAY = {"room": "Ada", "day": "Friday"}


def at(ms: float) -> datetime:
    return ZERO + timedelta(milliseconds=ms)


def customer(
    ms: float, intent: str, params: dict[str, Any] | None = None, channel: str = "voice"
) -> Utterance:
    return Utterance(
        at=at(ms),
        speaker="customer",
        channel=channel,
        text=intent,
        spoken=intent,
        intent=intent,
        params=params,
    )


def assistant(ms: float, claim: str, channel: str = "voice") -> Utterance:
    return Utterance(at=at(ms), speaker="assistant", channel=channel, text=claim, spoken=claim, claim=claim)


def mark(ms: float, name: MarkName, params: dict[str, Any] | None = None) -> Mark:
    return Mark(at=at(ms), name=name, params=params)


def timeline(*items: Utterance | Mark) -> Timeline:
    return Timeline(
        utterances=[item for item in items if isinstance(item, Utterance)],
        marks=[item for item in items if isinstance(item, Mark)],
    )


def record(
    created_ms: float, cancelled_ms: float | None = None, payload: dict[str, Any] | None = None
) -> Record:
    return Record(
        id=f"b-{created_ms:g}",
        payload=payload if payload is not None else dict(THURSDAY),
        status="cancelled" if cancelled_ms is not None else "booked",
        committed_at=at(created_ms),
        cancelled_at=at(cancelled_ms) if cancelled_ms is not None else None,
    )


def truth(*records: Record, writes: int | None = None) -> GroundTruth:
    count = len(records) if writes is None else writes
    return GroundTruth(records=list(records), writes=[Write(received_at=at(0)) for _ in range(count)])


# The METRICS keys results.json must carry (docs/reference.md).
CONTRACT_METRICS = {
    "attempts",
    "duplicate_writes",
    "false_done",
    "false_not_done",
    "honest_unknown",
    "unnecessary_prompts",
    "missed_reauthorization",
    "time_to_truth_ms_p50",
    "time_to_truth_ms_p95",
}
