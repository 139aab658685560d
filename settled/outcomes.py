"""What a business system's answer means (docs/reference.md), as pure functions of the answer.

The activities do the HTTP; these functions decide. Keeping them pure lets the rules be tested
on their own and read in one place.
"""

from typing import Any, Literal

from pydantic import BaseModel

from settled.templates import lookup_path

# Statuses that say "not now" or "conflict" rather than "no": the write may still have happened.
_INDETERMINATE_4XX = frozenset({408, 409, 425, 429})

Transport = Literal["not_connected", "broken", "timeout"]


class DispatchOutcome(BaseModel):
    result: Literal["confirmed", "rejected", "not_sent", "unknown"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str

    @property
    def may_have_reached(self) -> bool:
        return self.result != "not_sent"


class LookupOutcome(BaseModel):
    result: Literal["applied", "not_applied", "inconclusive"]
    status_code: int | None = None
    business_ref: str | None = None
    detail: str


class CompensationOutcome(BaseModel):
    result: Literal["compensated", "rejected", "unknown"]
    status_code: int | None = None
    detail: str


def _reference(body: Any, reference_field: str) -> str | None:
    value = lookup_path(body, reference_field) if reference_field else None
    return None if value is None else str(value)


def error_message(body: Any) -> str | None:
    """The service's own words for an error, from the common JSON error shapes."""
    if isinstance(body, dict):
        for path in ("error.message", "message", "detail", "error.code", "error"):
            value = lookup_path(body, path)
            if isinstance(value, str) and value:
                return value[:300]
    return None


def classify_dispatch(status_code: int, body: Any, reference_field: str) -> DispatchOutcome:
    if 200 <= status_code < 300:
        return DispatchOutcome(
            result="confirmed",
            status_code=status_code,
            business_ref=_reference(body, reference_field),
            detail=f"the service confirmed it ({status_code})",
        )
    if 400 <= status_code < 500 and status_code not in _INDETERMINATE_4XX:
        words = error_message(body) or "no reason given"
        return DispatchOutcome(
            result="rejected",
            status_code=status_code,
            detail=f"the service refused it ({status_code}: {words})",
        )
    return DispatchOutcome(
        result="unknown", status_code=status_code, detail=f"the service answered {status_code}, not a verdict"
    )


def classify_dispatch_transport(failure: Transport, error: str) -> DispatchOutcome:
    if failure == "not_connected":
        return DispatchOutcome(result="not_sent", detail=f"could not connect, nothing was sent ({error})")
    what = "no answer in time" if failure == "timeout" else "the connection broke"
    return DispatchOutcome(result="unknown", detail=f"{what} after the request was sent ({error})")


def classify_lookup(status_code: int, body: Any, reference_field: str, authoritative: bool) -> LookupOutcome:
    if status_code == 200:
        return LookupOutcome(
            result="applied",
            status_code=200,
            business_ref=_reference(body, reference_field),
            detail="the lookup found it applied",
        )
    if status_code == 404 and authoritative:
        return LookupOutcome(
            result="not_applied", status_code=404, detail="the lookup says it was never applied"
        )
    return LookupOutcome(
        result="inconclusive",
        status_code=status_code,
        detail=f"the lookup answered {status_code}, inconclusive",
    )


def classify_lookup_transport(error: str) -> LookupOutcome:
    return LookupOutcome(result="inconclusive", detail=f"the lookup got no answer ({error})")


def classify_compensation(status_code: int, body: Any) -> CompensationOutcome:
    if 200 <= status_code < 300:
        return CompensationOutcome(
            result="compensated", status_code=status_code, detail="the service reversed it"
        )
    if 400 <= status_code < 500 and status_code not in _INDETERMINATE_4XX:
        words = error_message(body) or "no reason given"
        return CompensationOutcome(
            result="rejected", status_code=status_code, detail=f"the service refused to reverse it ({words})"
        )
    return CompensationOutcome(
        result="unknown",
        status_code=status_code,
        detail=f"the reversal answered {status_code}, not a verdict",
    )


def classify_compensation_transport(error: str) -> CompensationOutcome:
    return CompensationOutcome(result="unknown", detail=f"the reversal got no answer ({error})")
