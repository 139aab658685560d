"""The metrics on hand-made utterance logs and record sets: every claim is judged at its own time."""

import pytest
from settled.drill.results import RunMetrics, measure, percentile, summarize

from tests.drill.builders import FRIDAY, THURSDAY, assistant, customer, mark, record, timeline, truth


def test_a_done_claim_before_the_commit_is_false_and_premature_after_it_true() -> None:
    said = timeline(customer(0, "consent", THURSDAY), assistant(10, "done"), assistant(60, "done"))
    metrics = measure(said, truth(record(50)))
    assert (metrics.false_done, metrics.premature_done) == (1, 1)


def test_a_done_claim_at_the_commit_instant_is_true() -> None:
    assert measure(timeline(assistant(50, "done")), truth(record(50))).false_done == 0


def test_done_claimed_when_nothing_is_ever_applied_is_false_but_not_premature() -> None:
    metrics = measure(timeline(assistant(10, "done")), truth(writes=1))
    assert (metrics.false_done, metrics.premature_done, metrics.attempts) == (1, 0, 1)


def test_a_cancelled_then_compensated_record_stands_only_between_commit_and_reversal() -> None:
    said = timeline(
        assistant(10, "not_done"),  # before the commit: true
        assistant(60, "not_done"),  # while it stands: false
        assistant(70, "done"),  # while it stands: true
        assistant(120, "done"),  # after the reversal: false
        assistant(130, "not_done"),  # after the reversal: true
    )
    metrics = measure(said, truth(record(50, cancelled_ms=100)))
    assert (metrics.false_not_done, metrics.false_done, metrics.duplicate_writes) == (1, 1, 0)


def test_records_beyond_the_first_are_duplicates_and_every_write_is_an_attempt() -> None:
    metrics = measure(timeline(), truth(record(10), record(20), record(30, cancelled_ms=40), writes=4))
    assert (metrics.duplicate_writes, metrics.attempts) == (2, 4)


def test_unknown_and_in_progress_claims_are_never_false() -> None:
    said = timeline(assistant(10, "unknown"), assistant(60, "unknown"), assistant(70, "in_progress"))
    metrics = measure(said, truth(record(50)))
    assert (metrics.honest_unknown, metrics.false_done, metrics.false_not_done) == (2, 0, 0)


def test_time_to_truth_runs_from_the_first_ask_to_the_first_true_definitive_answer() -> None:
    said = timeline(
        customer(1000, "ask", channel="text"),
        assistant(1010, "unknown", channel="text"),
        assistant(1020, "not_done", channel="text"),  # definitive but false: the record stands
        customer(1200, "followup", channel="text"),
        assistant(1250, "done", channel="text"),
    )
    metrics = measure(said, truth(record(500)))
    assert metrics.asked and metrics.time_to_truth_ms == pytest.approx(250)


def test_time_to_truth_is_none_when_no_true_answer_comes_and_voice_answers_do_not_count() -> None:
    said = timeline(
        customer(1000, "ask", channel="text"), assistant(1100, "done"), assistant(1200, "not_done", "text")
    )
    metrics = measure(said, truth(record(500)))
    assert metrics.asked and metrics.time_to_truth_ms is None
    assert measure(timeline(assistant(10, "done")), truth()).asked is False


def test_asking_again_for_a_recorded_consent_to_the_same_params_is_unnecessary() -> None:
    said = timeline(
        assistant(0, "prompt"),  # before any consent: needed
        customer(100, "consent", THURSDAY),
        mark(150, "consent_recorded", THURSDAY),
        assistant(900, "prompt", channel="text"),  # the same go-ahead again: unnecessary
    )
    assert measure(said, truth()).unnecessary_prompts == 1


@pytest.mark.parametrize(
    "events",
    [
        # The consent was given but never recorded (the call dropped first).
        [customer(100, "consent", THURSDAY)],
        # The customer changed the params after consenting: the new ones need a go-ahead.
        [
            customer(100, "consent", THURSDAY),
            mark(150, "consent_recorded", THURSDAY),
            customer(200, "change", FRIDAY),
        ],
    ],
)
def test_a_prompt_is_needed_when_the_consent_was_not_recorded_or_the_params_changed(events: list) -> None:
    assert measure(timeline(*events, assistant(900, "prompt", "text")), truth()).unnecessary_prompts == 0


def test_a_write_whose_params_differ_from_the_latest_consent_missed_reauthorization() -> None:
    said = timeline(customer(0, "consent", THURSDAY), customer(80, "change", FRIDAY))
    assert (
        measure(
            said, truth(record(100, payload={**FRIDAY, "client_reference": "t-1"}))
        ).missed_reauthorization
        == 1
    )
    fresh = timeline(
        customer(0, "consent", THURSDAY), customer(80, "change", FRIDAY), customer(90, "go_ahead", FRIDAY)
    )
    assert (
        measure(
            fresh, truth(record(100, payload={**FRIDAY, "client_reference": "t-1"}))
        ).missed_reauthorization
        == 0
    )


def test_a_write_before_any_consent_missed_reauthorization() -> None:
    late = timeline(customer(200, "consent", THURSDAY))  # a consent after the write does not cover it
    assert measure(late, truth(record(100))).missed_reauthorization == 1


def test_first_words_run_from_the_end_of_the_consent_turn_to_the_first_voice_sentence() -> None:
    said = timeline(mark(100, "consent_turn_end"), assistant(50, "prompt"), assistant(180, "unknown"))
    assert measure(said, truth()).first_words_ms == pytest.approx(80)


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([10.0], 0.95) == 10.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.5) == 25.0
    assert percentile([0.0, 100.0], 0.95) == pytest.approx(95.0)


def test_the_summary_sums_counts_and_takes_percentiles_over_runs() -> None:
    runs = [
        RunMetrics(attempts=2, duplicate_writes=1, asked=True, time_to_truth_ms=10.0, write_latency_ms=[4.0]),
        RunMetrics(attempts=1, false_done=1, asked=True, time_to_truth_ms=30.0, write_latency_ms=[6.0]),
        RunMetrics(attempts=1, asked=True, time_to_truth_ms=None),
    ]
    summary = summarize(runs)
    assert (summary["attempts"], summary["duplicate_writes"], summary["false_done"]) == (4, 1, 1)
    assert (summary["time_to_truth_ms_p50"], summary["time_to_truth_ms_p95"]) == (20.0, 29.0)
    assert (summary["truth_not_reached"], summary["runs"], summary["write_latency_ms_p50"]) == (1, 3, 5.0)
