"""One request written two ways is one request: params compared as JSON values, never as text.

A model that asks again after an interruption re-serializes its arguments, and whether it writes `5`,
`5.0` or `5e0` is not something a team controls. So wherever settled derives an operation id from params
or compares two params (a repeated create, an amend), it uses one canonical form:

- every string, object keys included, is taken in Unicode Normalization Form C (NFC), so the same text
  typed with a combining accent or a precomposed letter is one text;
- every number is taken as the IEEE 754 double it denotes, as JSON's own data model (I-JSON) and every
  JavaScript runtime take it: `5`, `5.0` and `5e0` are one number, and an integer beyond 2^53 is the
  nearest double (such integers are not exchanged exactly between JSON implementations anyway);
- the value is then written by RFC 8785, the JSON Canonicalization Scheme (keys sorted by UTF-16 code
  units, no white space, numbers in ECMAScript's shortest form: `5.0` is `5`, `1e21` is `1e+21`).

The writer is this module's own, a few lines on the standard library, because the light install (what an
agent app installs for the adapters) brings pydantic and httpx only; tests hold it to the `rfc8785`
library's output on generated values.

Values that really differ stay different: `5` and `5.1`, `"5"` and `5`, `[1, 2]` and `[2, 1]`.
The TypeScript client computes the same form (its test vectors are generated from this module).
"""

import hashlib
import json
import math
import unicodedata
from decimal import Decimal
from typing import Any

_SAFE_INTEGER = 2**53 - 1


def not_text(value: Any, path: str = "params") -> str | None:
    """Where a JSON value holds a string (a value or an object's key) that is not valid Unicode text,
    as a dotted path (`params.note`; a key itself named with escapes): a lone surrogate, which JSON's
    `\\ud800` escape can carry and no UTF-8 text can. None when every string is text."""
    if isinstance(value, str):
        return None if is_text(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_text(str(key)):
                return f"{path}.{str(key).encode('ascii', 'backslashreplace').decode()}"
            found = not_text(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = not_text(item, f"{path}.{index}")
            if found is not None:
                return found
    return None


def is_text(value: str) -> bool:
    """Whether a string is Unicode text (holds no lone surrogate): what UTF-8 can write."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_params(params: Any) -> str:
    """The canonical text of a JSON value (normally a kind's params object)."""
    return _write(_normal(params))


def params_digest(params: Any) -> str:
    """SHA-256 of the canonical form: what an action remembers of the params it was requested with."""
    return hashlib.sha256(canonical_params(params).encode()).hexdigest()


def same_params(a: Any, b: Any) -> bool:
    return canonical_params(a) == canonical_params(b)


def earlier_params_text(params: Any) -> str:
    """The form used before params were compared as values (Python's `json.dumps` with sorted keys):
    ids derived and digests recorded with it must keep meeting their actions. For params of strings in
    NFC and integers, both forms are the same text."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def earlier_params_digest(params: Any) -> str:
    return hashlib.sha256(earlier_params_text(params).encode()).hexdigest()


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -_SAFE_INTEGER <= value <= _SAFE_INTEGER else float(value)
    if isinstance(value, float):
        # JSON has no NaN or infinity; the API refuses them. Should one reach here, it is kept apart from
        # every number rather than failing the workflow task that compares it.
        return value if math.isfinite(value) else f"\ufffd{value!r}"
    if isinstance(value, dict):
        return {unicodedata.normalize("NFC", str(key)): _normal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(item) for item in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _write(value: Any) -> str:
    if isinstance(value, dict):
        # "surrogatepass": a key that is no Unicode text still sorts (such params are refused by name
        # wherever they are sent, but deriving their id must not fail); text sorts as before.
        items = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(f"{_text(key)}:{_write(item)}" for key, item in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write(item) for item in value) + "]"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, float):
        return _number(value)
    return json.dumps(value)  # int (within 2^53), bool, None


def _text(value: str) -> str:
    # RFC 8785 §3.2.2.2 escapes exactly what Python's writer escapes when non-ASCII is kept as it is.
    return json.dumps(value, ensure_ascii=False)


def _number(value: float) -> str:
    """ECMAScript's Number.prototype.toString (RFC 8785 §3.2.2.3): the shortest digits that read back
    as the same double (Python's repr finds them), laid out as JavaScript lays them out."""
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, point = len(digits), len(digits) + int(exponent)  # the decimal point sits `point` digits in
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{point - 1:+d}"
