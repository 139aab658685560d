"""Bulkheads: what one kind's requests may hold in a worker process, so a slow service holds back only
its own kind (contract §1, "one kind's trouble stays its own").

- A kind's business activities run on its own task queue (`settled.identity.kind_task_queue`), polled
  by a worker of their own with `queue_slots(kind)` activity slots and an HTTP pool of that size: a
  kind's backlog waits in Temporal, durably, holding no slot and no connection of any other kind.
- A quick call inside a workflow task (a local activity, `ActionRecord.in_task`) holds a workflow task
  slot and a local-activity slot of the shared worker while it runs. `InTaskLimit` lets at most
  `in_task_budget(kind)` of one kind's, and `IN_TASK_PER_PROCESS` of all kinds', run at once in a
  process; one over refuses at once, sends nothing, and the workflow schedules the call on the kind's
  queue instead (`settled.activities.inputs.refused_in_task`). The refusal is the local activity's
  recorded result, so replay takes the same path.

Per process, a kind's requests open at its service are at most `queue_slots + in_task_budget` =
`max_in_flight`.
"""

from collections.abc import Collection
from typing import Any

from settled.activities.inputs import IN_TASK_REFUSED
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from settled.kinds import KindSpec

# Of the shared worker's 100 workflow-task and 100 local-activity slots, in-task business calls of
# all kinds together hold at most this many: the rest stay free for every other workflow task.
IN_TASK_PER_PROCESS = 64
# One kind's in-task calls at once, per process, at most (and at most a third of its max_in_flight).
IN_TASK_PER_KIND = 16


def in_task_budget(kind: KindSpec) -> int:
    return min(IN_TASK_PER_KIND, kind.max_in_flight // 3)


def queue_slots(kind: KindSpec) -> int:
    """The activity slots (and HTTP connections) of the kind's own queue in one worker process."""
    return kind.max_in_flight - in_task_budget(kind)


class InTaskLimit(Interceptor):
    """Counts in-task business calls per kind in this process; refuses one over the kind's budget or
    the process's, and calls of kinds this process does not serve (`served`, None: all)."""

    def __init__(self, served: Collection[str] | None = None) -> None:
        self.served = None if served is None else frozenset(served)
        self.running: dict[str, int] = {}
        self.total = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Counting(next, self)


class _Counting(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, limit: InTaskLimit) -> None:
        super().__init__(next)
        self._limit = limit

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = getattr(input.args[0], "kind", None) if input.args else None
        if not activity.info().is_local or not isinstance(kind, KindSpec):
            return await super().execute_activity(input)
        limit = self._limit
        name = kind.name
        running = limit.running.get(name, 0)
        if (
            (limit.served is not None and name not in limit.served)
            or running >= in_task_budget(kind)
            or limit.total >= IN_TASK_PER_PROCESS
        ):
            raise ApplicationError(
                f"{running} in-task calls of {name} running here: sent on its queue instead",
                type=IN_TASK_REFUSED,
                non_retryable=True,
            )
        limit.running[name] = running + 1
        limit.total += 1
        try:
            return await super().execute_activity(input)
        finally:
            limit.running[name] -= 1
            limit.total -= 1
