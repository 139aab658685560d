"""Answer mapping: what a business service's HTTP answer means, as pure functions of the answer.

Before the general rules (2xx applied; 4xx but 408/409/425/429 refused; the rest unknown), a request's
`statuses` decide; a lookup's `found` says which part of a 200 is ours; `confirmed_when` and
`failed_when` tell a final answer from an accepted, unfinished one; `reversed_when` tells a write
that was reversed since.
"""

import functools
import json
from typing import Any, Literal

import jmespath
from jmespath.parser import ParsedResult

from settled.business.shapes import Values
from settled.domain.kinds import HttpCall, KindSpec, LookupCall
from settled.domain.outcomes import CompensationOutcome, DispatchOutcome, LookupOutcome
from settled.domain.templates import lookup_path, substitute

# Statuses that say "not now" or "conflict" rather than "no": the write may still have happened.
INDETERMINATE_4XX = frozenset({408, 409, 425, 429})
Transport = Literal["not_connected", "broken", "timeout"]


def error_message(body: Any) -> str | None:
    """The service's own words for an error, from the common JSON error shapes or a plain-text answer."""
    if isinstance(body, str):
        return body[:300]
    if isinstance(body, dict):
        for path in ("error.message", "message", "detail", "failure_reason", "error.code", "error"):
            value = lookup_path(body, path)
            if isinstance(value, str) and value:
                return value[:300]
    return None


def _refused(status_code: int, body: Any, what: str) -> str:
    words = error_message(body) or "no reason given"
    if status_code == 401:
        return f"the service refused our credentials ({status_code}: {words})"
    return f"the service refused {what} ({status_code}: {words})"


def _refusal(mapped: str | None, status_code: int) -> bool:
    """A "no": mapped so, or unmapped and any 4xx but those that say "not now" or "conflict"."""
    if mapped is not None:
        return mapped == "rejected"
    return 400 <= status_code < 500 and status_code not in INDETERMINATE_4XX


def _reference(found: Any, reference_field: str) -> str | None:
    value = lookup_path(found, reference_field) if reference_field else None
    return None if value is None or isinstance(value, dict | list) else str(value)


# -- JMESPath with placeholders ---------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> ParsedResult:
    return jmespath.compile(text)


def _literal(value: Any) -> str:
    return "`" + json.dumps(value).replace("`", "\\`") + "`"


def evaluate(expression: str, data: Any, values: Values) -> Any:
    """The expression over `data`, its placeholders standing as JSON literals."""
    mapping = values.as_mapping()
    return _compiled(substitute(expression, lambda name: _literal(lookup_path(mapping, name)))).search(data)


def truthy(value: Any) -> bool:
    """JMESPath's truth: null, false, empty text, empty list and empty object are false (0 is true)."""
    return not (value is None or value is False or (isinstance(value, str | list | dict) and not value))


def _finished(kind: KindSpec, found: Any, values: Values) -> Literal["confirmed", "failed", "pending"]:
    """Final or not, by `failed_when` (it wins) and `confirmed_when` (missing: "not failed")."""
    if kind.failed_when and truthy(evaluate(kind.failed_when, found, values)):
        return "failed"
    if kind.confirmed_when is None or truthy(evaluate(kind.confirmed_when, found, values)):
        return "confirmed"
    return "pending"


def _ended_reason(found: Any) -> str:
    words = error_message(found) or (lookup_path(found, "status") if isinstance(found, dict) else None)
    return f"the service ended it without applying it ({words or 'no reason given'})"


# -- dispatch --------------------------------------------------------------------------------------


def classify_dispatch(
    kind: KindSpec, call: HttpCall, status_code: int, body: Any, values: Values
) -> DispatchOutcome:
    mapped = call.statuses.get(status_code)
    ref = _reference(body, kind.reference_field)
    if mapped == "applied" or (mapped is None and 200 <= status_code < 300 and not kind.answers_unfinished):
        return DispatchOutcome(
            result="confirmed", status_code=status_code, business_ref=ref,
            detail=f"the service confirmed it ({status_code})",
        )  # fmt: skip
    if mapped is None and 200 <= status_code < 300:
        match _finished(kind, body, values):
            case "confirmed":
                return DispatchOutcome(
                    result="confirmed", status_code=status_code, business_ref=ref,
                    detail=f"the service confirmed it ({status_code})",
                )  # fmt: skip
            case "failed":
                return DispatchOutcome(result="rejected", status_code=status_code, detail=_ended_reason(body))
            case "pending":
                return DispatchOutcome(
                    result="pending", status_code=status_code, business_ref=ref,
                    detail=f"the service accepted it and is finishing it ({status_code})",
                )  # fmt: skip
    if _refusal(mapped, status_code):
        return DispatchOutcome(
            result="rejected", status_code=status_code, detail=_refused(status_code, body, "it")
        )
    return DispatchOutcome(
        result="unknown", status_code=status_code, detail=f"the service answered {status_code}, not a verdict"
    )


def classify_dispatch_transport(failure: Transport, error: str) -> DispatchOutcome:
    if failure == "not_connected":
        return DispatchOutcome(result="not_sent", detail=f"could not connect, nothing was sent ({error})")
    what = "no answer in time" if failure == "timeout" else "the connection broke"
    return DispatchOutcome(result="unknown", detail=f"{what} after the request was sent ({error})")


# -- lookup ----------------------------------------------------------------------------------------


def classify_lookup(
    kind: KindSpec, call: LookupCall, status_code: int, body: Any, values: Values
) -> LookupOutcome:
    mapped = call.statuses.get(status_code)
    if mapped == "applied":
        return LookupOutcome(
            result="applied", status_code=status_code, business_ref=_reference(body, kind.reference_field),
            detail=f"the lookup found it applied ({status_code})",
        )  # fmt: skip
    if mapped == "unknown":
        return _inconclusive(status_code)
    if mapped is None and status_code == 200:
        found = evaluate(call.found, body, values) if call.found else body
        if call.found is None or truthy(found):
            return _found(kind, call, found, values)
        status_code = 404  # not found in the answer: as a 404
    if mapped == "not_applied" or (status_code == 404 and call.authoritative):
        return LookupOutcome(
            result="not_applied", status_code=status_code, detail="the lookup says it was never applied"
        )
    if status_code == 401:
        return LookupOutcome(
            result="inconclusive",
            status_code=401,
            detail=_refused(401, body, "the lookup") + ", inconclusive",
        )
    return _inconclusive(status_code)


def _inconclusive(status_code: int) -> LookupOutcome:
    return LookupOutcome(
        result="inconclusive",
        status_code=status_code,
        detail=f"the lookup answered {status_code}, inconclusive",
    )


def _found(kind: KindSpec, call: LookupCall, found: Any, values: Values) -> LookupOutcome:
    ref = _reference(found, kind.reference_field)
    reversed_ = bool(call.reversed_when) and truthy(evaluate(call.reversed_when or "", found, values))
    match _finished(kind, found, values):
        case "failed":
            return LookupOutcome(
                result="rejected",
                status_code=200,
                business_ref=ref,
                detail=_ended_reason(found),
                reversed=reversed_,
            )
        case "pending":
            return LookupOutcome(
                result="pending", status_code=200, business_ref=ref, reversed=reversed_,
                detail="the lookup found it accepted, not finished yet",
            )  # fmt: skip
    return LookupOutcome(
        result="applied",
        status_code=200,
        business_ref=ref,
        detail="the lookup found it applied",
        reversed=reversed_,
    )


def classify_lookup_transport(error: str) -> LookupOutcome:
    return LookupOutcome(result="inconclusive", detail=f"the lookup got no answer ({error})")


# -- compensate ------------------------------------------------------------------------------------


def classify_compensation(call: HttpCall, status_code: int, body: Any) -> CompensationOutcome:
    mapped = call.statuses.get(status_code)
    gone = call.method == "DELETE" and status_code in (404, 410)
    if mapped == "applied" or (mapped is None and (200 <= status_code < 300 or gone)):
        return CompensationOutcome(
            result="compensated", status_code=status_code, detail="the service reversed it"
        )
    if _refusal(mapped, status_code):
        return CompensationOutcome(
            result="rejected", status_code=status_code, detail=_refused(status_code, body, "to reverse it")
        )
    return CompensationOutcome(
        result="unknown",
        status_code=status_code,
        detail=f"the reversal answered {status_code}, not a verdict",
    )


def classify_compensation_transport(error: str) -> CompensationOutcome:
    return CompensationOutcome(result="unknown", detail=f"the reversal got no answer ({error})")
