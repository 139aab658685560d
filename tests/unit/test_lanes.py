"""A kind's share of the shared worker and its own queue's slots add up to its `max_in_flight`."""

import pytest
from settled.activities.lanes import SHARED_PER_KIND, SHARED_PER_PROCESS, queue_slots, shared_budget

from settled.domain.kinds import parse_kinds, sandbox_kinds_text
from settled.temporal.identity import kind_task_queue


def spec(max_in_flight: int | None):  # type: ignore[no-untyped-def]
    text = sandbox_kinds_text("http://127.0.0.1:1")
    if max_in_flight is not None:
        text = text.replace("timeout_s = 2.0\n", f"timeout_s = 2.0\nmax_in_flight = {max_in_flight}\n", 1)
    kind = parse_kinds(text, "test").get("room_booking")
    assert kind is not None
    return kind


@pytest.mark.parametrize(
    ("cap", "shared", "slots"), [(None, 16, 34), (1, 0, 1), (2, 0, 2), (3, 1, 2), (12, 4, 8), (1000, 16, 984)]
)
def test_the_shared_share_and_the_queue_slots_add_up(cap: int | None, shared: int, slots: int) -> None:
    kind = spec(cap)
    assert kind.max_in_flight == (cap or 50)
    assert (shared_budget(kind), queue_slots(kind)) == (shared, slots)
    assert shared_budget(kind) + queue_slots(kind) == kind.max_in_flight


def test_the_shared_worker_keeps_most_of_its_slots_for_everything_else() -> None:
    assert SHARED_PER_KIND < SHARED_PER_PROCESS < 100  # the SDK's 100 workflow-task and local-activity slots


def test_a_cap_below_one_is_refused_and_a_kinds_queue_is_named_after_it() -> None:
    with pytest.raises(Exception, match="max_in_flight"):
        spec(0)
    assert kind_task_queue("room_booking") == "settled-kind-room_booking"
