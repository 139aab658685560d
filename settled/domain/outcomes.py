"""What a business system's answer means to an action: the verdicts the state machine reads.

How an HTTP answer or a handler's report becomes one of these is settled.business.answers; the
machine (settled.domain.machine) decides what each verdict does to the action.
"""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel


class LookupOutcome(BaseModel):
    # `pending`: found, accepted and not finished; `rejected`: found, ended without being applied.
    result: Literal["applied", "pending", "rejected", "not_applied", "inconclusive"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str
    # Found, and reversed since (`reversed_when`): for a compensation whose answer was lost.
    reversed: bool = False


class DispatchOutcome(BaseModel):
    # `pending`: the service accepted it and has not finished it (accepted is not done). `withdrawn`:
    # a send waiting in its kind's queue was taken back (a cancel, an amend) before a worker took it.
    result: Literal["confirmed", "pending", "rejected", "not_sent", "unknown", "withdrawn"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str
    # When the worker took a send that waited in its kind's queue: when it began to be sent.
    taken_at: datetime | None = None
    # A lost answer (`unknown`) looked up in the same business call, right away, where the workflow asked
    # for it (`BusinessCall.look_up_if_lost`): the lookup's answer, recorded with the lost send's.
    lookup: LookupOutcome | None = None

    @property
    def may_have_reached(self) -> bool:
        return self.result not in ("not_sent", "withdrawn")


class CompensationOutcome(BaseModel):
    result: Literal["compensated", "rejected", "unknown"]
    status_code: int | None = None
    detail: str
