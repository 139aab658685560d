"""One request written two ways is one request: params compared as JSON values, never as text.

A model that asks again after an interruption re-serializes its arguments, and whether it writes `5`,
`5.0` or `5e0` is not something a team controls. So wherever settled derives an operation id from params
or compares two params (a repeated create, an amend), it uses one canonical form:

- every string, object keys included, is taken in Unicode Normalization Form C (NFC), so the same text
  typed with a combining accent or a precomposed letter is one text;
- every number is taken as the IEEE 754 double it denotes, as JSON's own data model (I-JSON) and every
  JavaScript runtime take it: `5`, `5.0` and `5e0` are one number, and an integer beyond 2^53 is the
  nearest double (such integers are not exchanged exactly between JSON implementations anyway);
- the value is then written by RFC 8785, the JSON Canonicalization Scheme (keys sorted, no white space,
  numbers in ECMAScript's shortest form: `5.0` is `5`, `1e21` is `1e+21`), by the `rfc8785` library.

Values that really differ stay different: `5` and `5.1`, `"5"` and `5`, `[1, 2]` and `[2, 1]`.
The TypeScript client computes the same form (its test vectors are generated from this module).
"""

import hashlib
import json
import math
import unicodedata
from typing import Any

import rfc8785

_SAFE_INTEGER = 2**53 - 1


def canonical_params(params: Any) -> str:
    """The canonical text of a JSON value (normally a kind's params object)."""
    return rfc8785.dumps(_normal(params)).decode()


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
