"""The fake business services: what a create request must contain and what a record looks like."""

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

ServiceName = Literal["bookings", "refunds", "transfers"]
Op = Literal["create", "lookup", "cancel"]


class BookingIn(BaseModel):
    room: str = Field(min_length=1)
    day: str = Field(min_length=1)
    client_reference: str | None = None


class RefundIn(BaseModel):
    order_id: str = Field(min_length=1)
    # strict: a real payments API would not read "25.5" or true as an amount.
    amount: Annotated[float, Field(gt=0, strict=True)]
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    client_reference: str | None = None


class TransferIn(BaseModel):
    destination: str = Field(min_length=1)
    amount: Annotated[float, Field(gt=0, strict=True)]
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    client_reference: str | None = None


@dataclass(frozen=True)
class ServiceSpec:
    name: ServiceName
    id_prefix: str
    model: type[BaseModel]
    created_status: str
    # bookings demand an Idempotency-Key; refunds model a service that may be called without one.
    key_required: bool
    reversible: bool
    # transfers accept first and finish later: 202 `pending`, then `succeeded` or `failed` (settling.py).
    # A transfer can be cancelled only while it is pending.
    finishes_later: bool = False
    created_http: int = 201
    cancelled_status: str = "cancelled"

    def fields(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The business fields of a stored (already validated) payload, in the order the API shows them."""
        return self.model.model_validate(payload).model_dump(exclude={"client_reference"})


BOOKINGS = ServiceSpec(
    name="bookings",
    id_prefix="b",
    model=BookingIn,
    created_status="booked",
    key_required=True,
    reversible=True,
)
REFUNDS = ServiceSpec(
    name="refunds",
    id_prefix="r",
    model=RefundIn,
    created_status="refunded",
    key_required=False,
    reversible=False,
)
TRANSFERS = ServiceSpec(
    name="transfers",
    id_prefix="t",
    model=TransferIn,
    created_status="pending",
    key_required=True,
    reversible=True,
    finishes_later=True,
    created_http=202,
    cancelled_status="canceled",
)
SERVICES: dict[str, ServiceSpec] = {spec.name: spec for spec in (BOOKINGS, REFUNDS, TRANSFERS)}
