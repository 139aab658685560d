"""What a kinds file would send, offline: each kind's requests for example params, secrets masked.

`settled check-kinds` prints it. The requests come from the same code that builds the real ones
(settled.business.shapes), with each secret standing as `{secret.NAME}` instead of its value.
"""

import base64
import binascii
import contextlib
from typing import Any

from settled.business.secrets import SecretError, read_secret
from settled.business.shapes import Role, Values, build
from settled.domain.kinds import Kinds, KindSpec
from settled.domain.params import InvalidParams, validate_params

EXAMPLE_OPERATION_ID = "example-op-1"


def example_params(schema: dict[str, Any]) -> dict[str, Any]:
    """Params that fit the schema well enough to show a request: its examples, defaults, enums, or
    a plain value of each property's type."""
    params = {}
    for name, prop in schema.get("properties", {}).items():
        params[name] = _example(prop if isinstance(prop, dict) else {}, name)
    return params


def _example(prop: dict[str, Any], name: str) -> Any:
    if prop.get("examples"):
        return prop["examples"][0]
    for key in ("default", "const"):
        if key in prop:
            return prop[key]
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return max(int(prop.get("minimum", 1)), 1)
    if kind == "number":
        return max(float(prop.get("minimum", 1)), 1.0)
    if kind == "boolean":
        return True
    if kind == "object":
        return example_params(prop)
    if kind == "array":
        return []
    return f"example-{name}"


def _masked(name: str) -> str:
    return "{secret." + name + "}"


def _readable(headers: dict[str, str]) -> dict[str, str]:
    """Basic credentials shown as what they encode, so the masked secret stays readable."""
    shown = dict(headers)
    for name, value in headers.items():
        if name.lower() == "authorization" and value.startswith("Basic "):
            with contextlib.suppress(binascii.Error, UnicodeDecodeError):
                shown[name] = f"Basic base64({base64.b64decode(value[6:]).decode()})"
    return shown


def preview_kind(kind: KindSpec, params: dict[str, Any] | None = None) -> dict[str, Any]:
    params = example_params(kind.params_schema) if params is None else params
    secrets = {}
    for name in sorted(kind.secret_names()):
        try:
            read_secret(name)
            secrets[name] = "set"
        except SecretError:
            secrets[name] = "not set"
    shown: dict[str, Any] = {"kind": kind.name, "params": params, "secrets": secrets}
    try:
        validate_params(kind, params)
    except InvalidParams as error:
        # A pattern or a format cannot be guessed: the schema's own `examples` say what fits.
        shown["params_unfit"] = f"{error} (give the property `examples` in params_schema)"
    if kind.handler is not None:
        shown["handler"] = kind.handler
        return shown
    requests = {}
    roles: list[Role] = ["dispatch", "lookup", "compensate"]
    for role in roles:
        if getattr(kind, role) is None:
            continue
        values = Values(EXAMPLE_OPERATION_ID, params, "example-ref" if role == "compensate" else None)
        sent = build(kind, role, values, _masked)
        requests[role] = {
            "method": sent.method,
            "url": sent.url,
            "headers": _readable(sent.headers),
            "body": None if sent.content is None else sent.content.decode(errors="replace"),
        }
    shown["requests"] = requests
    return shown


def preview(kinds: Kinds) -> list[dict[str, Any]]:
    return [preview_kind(kind) for kind in kinds]
