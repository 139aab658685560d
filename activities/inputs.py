"""What the workflow hands the business activities. Pure: imported by workflow code."""

from typing import Any

from pydantic import BaseModel

from settled.kinds import KindSpec


class BusinessCall(BaseModel):
    kind: KindSpec
    operation_key: str
    params: dict[str, Any]
    business_ref: str | None = None
    # For a code kind's `Request`; runs recorded before code kinds existed carry neither.
    operation_id: str | None = None
    attempt: int = 0


DISPATCH = "dispatch"
LOOKUP = "lookup"
COMPENSATE = "compensate"
