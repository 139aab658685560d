"""What a business system's answer means to an action: the verdicts the state machine reads.

How an HTTP answer or a handler's report becomes one of these is settled.business.answers; the
machine (settled.domain.machine) decides what each verdict does to the action.
"""

from typing import Literal

from pydantic import BaseModel


class DispatchOutcome(BaseModel):
    # `pending`: the service accepted it and has not finished it (accepted is not done).
    result: Literal["confirmed", "pending", "rejected", "not_sent", "unknown"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str

    @property
    def may_have_reached(self) -> bool:
        return self.result != "not_sent"


class LookupOutcome(BaseModel):
    # `pending`: found, accepted and not finished; `rejected`: found, ended without being applied.
    result: Literal["applied", "pending", "rejected", "not_applied", "inconclusive"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str
    # Found, and reversed since (`reversed_when`): for a compensation whose answer was lost.
    reversed: bool = False


class CompensationOutcome(BaseModel):
    result: Literal["compensated", "rejected", "unknown"]
    status_code: int | None = None
    detail: str
