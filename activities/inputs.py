"""What the workflow hands the business activities. Pure: imported by workflow code."""

from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ActivityError, ApplicationError

from settled.kinds import KindSpec


class BusinessCall(BaseModel):
    kind: KindSpec
    operation_key: str
    params: dict[str, Any]
    business_ref: str | None = None


DISPATCH = "dispatch"
LOOKUP = "lookup"
COMPENSATE = "compensate"
# A local activity refused by `settled.activities.lanes.InTaskLimit`: nothing was sent.
IN_TASK_REFUSED = "InTaskRefused"


def refused_in_task(error: ActivityError | ApplicationError) -> bool:
    """Whether an in-task call was refused (too many of its kind in the process): send it on the queue.
    (A local activity's own failure reaches the workflow as it was raised, not as an ActivityError.)"""
    cause = error.cause if isinstance(error, ActivityError) else error
    return isinstance(cause, ApplicationError) and cause.type == IN_TASK_REFUSED
