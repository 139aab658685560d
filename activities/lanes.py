"""Bulkheads: what one kind's requests may hold in a worker process, so a slow service holds back only
its own kind ("one kind's trouble stays its own", docs/reference.md).

A business call goes first where it is cheapest: inside the workflow task (a local activity, when a
caller waits: `ActionRecord.in_task`) or on the shared `settled` queue, where Temporal hands it back
eagerly to the worker that scheduled it (no trip through the queue). Both run on the shared worker,
whose slots every kind needs (workflow tasks, local-activity and activity slots). So there `SharedLane`
lets at most `shared_budget(kind)` calls of one kind, and `SHARED_PER_PROCESS` of all kinds, run at
once in a process; one over is refused at once, before anything is sent (`LANE_FULL`), and the
workflow schedules it on its kind's own queue (`settled.temporal.identity.kind_task_queue`), polled
by a worker of the kind's own with `queue_slots(kind)` slots and an HTTP pool as large: the kind's
backlog waits there in Temporal, durably, holding no slot and no connection. The refusal is the
call's recorded result, so replay takes the same path.

Per process, a kind's requests open at its service are at most `shared_budget + queue_slots` =
`max_in_flight`.
"""

from collections.abc import Collection
from typing import Any

from settled.activities.inputs import LANE_FULL
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from settled.domain.kinds import KindSpec

# Of the shared worker's 100 workflow-task and 100 local-activity slots (and 200 activity slots),
# business calls of all kinds together hold at most this many: the rest stay free for everything else.
SHARED_PER_PROCESS = 64
# One kind's calls on the shared worker at once, per process, at most (and a third of max_in_flight).
SHARED_PER_KIND = 16


def shared_budget(kind: KindSpec) -> int:
    return min(SHARED_PER_KIND, kind.max_in_flight // 3)


def queue_slots(kind: KindSpec) -> int:
    """The activity slots (and HTTP connections) of the kind's own queue in one worker process."""
    return kind.max_in_flight - shared_budget(kind)


class SharedLane(Interceptor):
    """Counts business calls per kind on the shared worker of this process; refuses one over the kind's
    budget or the process's, and calls of kinds this process does not serve (`served`; None: all)."""

    def __init__(self, served: Collection[str] | None = None) -> None:
        self.served = None if served is None else frozenset(served)
        self.running: dict[str, int] = {}
        self.by_type: dict[tuple[str, str], int] = {}  # (kind, activity type): for the gauge
        self.total = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Counting(next, self)


class _Counting(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, lane: SharedLane) -> None:
        super().__init__(next)
        self._lane = lane

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = getattr(input.args[0], "kind", None) if input.args else None
        if not isinstance(kind, KindSpec):
            return await super().execute_activity(input)
        lane = self._lane
        name = kind.name
        running = lane.running.get(name, 0)
        if (
            (lane.served is not None and name not in lane.served)
            or running >= shared_budget(kind)
            or lane.total >= SHARED_PER_PROCESS
        ):
            raise ApplicationError(
                f"{running} calls of {name} already run on this worker: sent on its own queue",
                type=LANE_FULL,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,  # logged at DEBUG, not counted as a failure
            )
        key = (name, activity.info().activity_type)
        lane.running[name] = running + 1
        lane.by_type[key] = lane.by_type.get(key, 0) + 1
        lane.total += 1
        _gauge(name, lane.by_type[key])
        try:
            return await super().execute_activity(input)
        finally:
            lane.running[name] -= 1
            lane.by_type[key] -= 1
            lane.total -= 1
            _gauge(name, lane.by_type[key])


def _gauge(kind: str, value: int) -> None:
    """`settled_shared_lane_in_flight{kind,activity_type}`: the kind's calls of that type on this
    process's shared worker now (its own queue's: `temporal_worker_task_slots_used{task_queue=
    "settled-kind-NAME"}`)."""
    activity.metric_meter().create_gauge(
        "settled_shared_lane_in_flight", "business calls of a kind running on the shared worker"
    ).set(value, {"kind": kind})
