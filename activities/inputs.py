"""What the workflow hands the business activities. Pure: imported by workflow code."""

from typing import Any

from pydantic import BaseModel
from temporalio.exceptions import ActivityError, ApplicationError

from settled.domain.kinds import KindSpec


class BusinessCall(BaseModel):
    kind: KindSpec
    operation_key: str
    params: dict[str, Any]
    business_ref: str | None = None
    # For a code kind's `Request`; runs recorded before code kinds existed carry neither.
    operation_id: str | None = None
    attempt: int = 0
    # A send that waited in its kind's queue: its worker asks the workflow for its turn (`SENDING`), and
    # sends what the answer holds, before anything leaves (runs before QUEUE_REVISION).
    queued: bool = False
    # A send that waited in its kind's queue since QUEUE_REVISION: Temporal's record that a worker took
    # it is the record that it is sending, so a cancel that reaches the worker after that is too late
    # to stop it: the request is finished and its answer returned.
    from_queue: bool = False
    # A send whose answer is lost is looked up once in the same call, right away, and both answers come
    # back together (`DispatchOutcome.lookup`): for runs since LEAN_REVISION, of kinds with a lookup.
    look_up_if_lost: bool = False


DISPATCH = "dispatch"
LOOKUP = "lookup"
COMPENSATE = "compensate"
# The update by which a queued send's worker records that it is sending now (runs before QUEUE_REVISION).
SENDING = "sending"
# A business call refused by the shared worker (`settled.activities.lanes.SharedLane`): nothing was sent.
LANE_FULL = "KindLaneFull"


def lane_full(error: ActivityError | ApplicationError) -> bool:
    """Whether the shared worker refused a call (its kind has no more room there): send it on the kind's
    own queue. (A local activity's failure reaches the workflow as raised, not as an ActivityError.)"""
    cause = error.cause if isinstance(error, ActivityError) else error
    return isinstance(cause, ApplicationError) and cause.type == LANE_FULL
