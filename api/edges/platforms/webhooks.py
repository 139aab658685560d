"""What every platform webhook checks before anything else: its signature (the secret read when the
request comes, like the business secrets; its age; its value, in constant time), then a body that is
a JSON object."""

import hashlib
import hmac
import json
import logging

from fastapi import HTTPException

from settled.business.secrets import SecretError, read_secret, secret_is_set

log = logging.getLogger("settled.api.edges.platforms")

# A signed request older (or newer) than this is refused: a recorded request cannot be replayed later.
MAX_AGE_S = 300.0
# A platform sends more than an adapter does (the call, its transcript so far, the assistant's
# settings): its routes take up to this much, whatever SETTLED_MAX_BODY_BYTES says.
PLATFORM_PREFIX = "/v1/platforms/"
PLATFORM_BODY_BYTES = 4 * 1024 * 1024


def optional_secret(name: str) -> str | None:
    """The secret in `name` (or the file `name_FILE` names), read now; None when it is not set. One
    that is set but cannot be read is logged, naming the variable only, and raises SecretError."""
    if not secret_is_set(name):
        return None
    try:
        return read_secret(name)
    except SecretError as error:
        log.error("%s", error)
        raise


def hex_hmac(key: str, message: bytes) -> str:
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def same(expected: str, presented: str) -> bool:
    """Compared in constant time (as bytes: a presented header may hold any character)."""
    return hmac.compare_digest(expected.encode(), presented.encode())


def fresh(signed_at_s: float, now_s: float) -> bool:
    return abs(now_s - signed_at_s) <= MAX_AGE_S


def refused(message: str) -> HTTPException:
    return HTTPException(401, message)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value")


def json_object(body: bytes) -> dict[str, object]:
    """The body as a JSON object (RFC 8259: no NaN), parsed only once its signature was checked; 400
    otherwise."""
    try:
        value = json.loads(body, parse_constant=_not_json)
    except ValueError:
        raise HTTPException(400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise HTTPException(400, "the body is not a JSON object")
    return value
