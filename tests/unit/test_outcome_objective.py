"""`outcome_objective_s`: the optional on-call objective of a kind, validated like its other durations."""

import pytest

from settled.domain.kinds import KindsFileError, parse_kinds

KIND = """
[kinds.refund]
description = "refund the order"
dispatch = { method = "POST", url = "http://127.0.0.1:8100/refunds" }
"""


def test_a_kind_has_no_objective_unless_it_sets_one() -> None:
    assert parse_kinds(KIND, "kinds.toml").get("refund").outcome_objective_s is None
    kinds = parse_kinds(KIND + "outcome_objective_s = 90\n", "kinds.toml")
    assert kinds.get("refund").outcome_objective_s == 90.0


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("0", "kinds.refund.outcome_objective_s: Input should be greater than 0"),
        ("-5", "kinds.refund.outcome_objective_s: Input should be greater than 0"),
        ("nan", "kinds.refund.outcome_objective_s: Input should be a finite number"),
        ("inf", "kinds.refund.outcome_objective_s: Input should be a finite number"),
        ("1e30", "outcome_objective_s: at most"),
        ('"fast"', "kinds.refund.outcome_objective_s"),
    ],
)
def test_a_bad_objective_is_refused_naming_the_key(value: str, named: str) -> None:
    with pytest.raises(KindsFileError) as refused:
        parse_kinds(KIND + f"outcome_objective_s = {value}\n", "kinds.toml")
    assert str(refused.value).startswith("kinds.toml: ") and named in str(refused.value), str(refused.value)
