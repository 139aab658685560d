"""The stream's event ids (`@N1.N2…`, one change number per action of the conversation): what a
reconnecting client's `Last-Event-ID` is read as, and what a stranger's id is read as."""

import pytest
from settled.api.routes.conversations import StreamPosition


@pytest.mark.parametrize(
    ("text", "numbers"),
    [("@", ()), ("@0", (0,)), ("@3.0.12", (3, 0, 12)), ("@7", (7,))],
)
def test_an_id_of_ours_is_read_back_as_it_was_written(text: str, numbers: tuple[int, ...]) -> None:
    position = StreamPosition.parse(text)
    assert position == StreamPosition(numbers) and position.event_id() == text


@pytest.mark.parametrize("text", [None, "", "12", "12.3", "@a", "@1..2", "@1.-2", "@ 1", "1.@2"])
def test_any_other_id_starts_afresh(text: str | None) -> None:
    """An earlier release's ids (`SEQ`, `SEQ.INDEX`) and anything else are not positions."""
    assert StreamPosition.parse(text) is None
