"""What the workflow hands the business activities. Pure: imported by workflow code."""

from typing import Any

from pydantic import BaseModel

from settled.kinds import KindSpec


class BusinessCall(BaseModel):
    kind: KindSpec
    operation_key: str
    params: dict[str, Any]
    business_ref: str | None = None


DISPATCH = "dispatch"
LOOKUP = "lookup"
COMPENSATE = "compensate"
