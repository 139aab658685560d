"""`settled check-kinds`'s example params: taken from the schema where it gives them, and said not to
fit where a value of the property's type cannot satisfy it (a pattern)."""

from pathlib import Path

from settled.business.preview import preview
from settled.domain.kinds import load_kinds, parse_kinds

EXAMPLES = Path(__file__).parents[2] / "examples" / "kinds"
PATTERNED = """
[kinds.visit]
description = "book a visit"
dispatch = { method = "POST", url = "https://visits.example.com/visits" }
idempotent = true
timeout_s = 2.0

[kinds.visit.params_schema]
type = "object"
required = ["day"]
properties = { day = { type = "string", pattern = "^[0-9]{8}$" } }
"""


def test_every_example_kinds_file_previews_params_its_own_schema_accepts() -> None:
    for path in sorted(EXAMPLES.glob("*.toml")):
        for kind in preview(load_kinds(path)):
            assert "params_unfit" not in kind, (path.name, kind["params_unfit"])


def test_params_that_do_not_fit_are_said_not_to() -> None:
    [kind] = preview(parse_kinds(PATTERNED, "test"))
    assert kind["params"] == {"day": "example-day"}
    assert kind["params_unfit"].startswith("params.day: 'example-day' does not match")
