"""Scenarios come from the seed alone, and both arms of one get the same script."""

import pytest
from settled.drill.plan import BOOKING, CUTS, REFUND, SANDBOX_TASKS, kinds_in_order, parse_cuts, plan


def test_a_seed_always_gives_the_same_script_and_both_arms_share_it() -> None:
    first = plan(2, list(CUTS.values()), ["transcript", "state"], SANDBOX_TASKS, "n1")
    again = plan(2, list(CUTS.values()), ["transcript", "state"], SANDBOX_TASKS, "n1")
    assert [(s.task_id, s.params, s.pauses) for s in first] == [
        (s.task_id, s.params, s.pauses) for s in again
    ]
    for transcript, state in zip(first[::2], first[1::2], strict=True):
        assert (transcript.arm, state.arm) == ("transcript", "state")
        assert (transcript.params, transcript.changed, transcript.pauses) == (
            state.params,
            state.changed,
            state.pauses,
        )
        assert transcript.task_id != state.task_id  # each arm's records are its own


def test_seeds_vary_params_and_c6_changes_exactly_one_field() -> None:
    scenarios = plan(6, [CUTS["C6"]], ["state"], SANDBOX_TASKS, "n1")
    bookings = [s for s in scenarios if s.kind is BOOKING]
    assert len({(s.params["room"], s.params["day"]) for s in bookings}) > 1
    for scenario in scenarios:
        changed = {k for k in scenario.params if scenario.params[k] != scenario.changed[k]}
        assert changed == ({"day"} if scenario.kind is BOOKING else {"amount"})
        assert scenario.wanted == scenario.changed


def test_the_order_of_the_kinds_varies_with_the_seed() -> None:
    orders = {tuple(kind.name for kind in kinds_in_order(seed, SANDBOX_TASKS)) for seed in range(1, 12)}
    assert orders == {(BOOKING.name, REFUND.name), (REFUND.name, BOOKING.name)}


def test_each_seed_sweeps_c5_both_ways_and_only_c5_has_a_variant() -> None:
    scenarios = plan(1, [CUTS["C0"], CUTS["C5"]], ["state"], SANDBOX_TASKS, "n1")
    assert {s.variant for s in scenarios if s.cut.id == "C5"} == {"before_commit", "after_commit"}
    assert {s.variant for s in scenarios if s.cut.id == "C0"} == {None}


def test_cuts_are_parsed_in_order_without_repeats_and_unknown_ones_refused() -> None:
    assert [cut.id for cut in parse_cuts("c2, C0,C2")] == ["C2", "C0"]
    with pytest.raises(ValueError, match="C9"):
        parse_cuts("C0,C9")
