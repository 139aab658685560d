"""Request shapes: what one request of a kind carries (URL, headers, body), from its templates.

Pure but for the secrets, which the caller reads (`secret`): the activities pass the real reader,
`settled check-kinds` a mask. The same code builds both, so what is printed is what is sent.
"""

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlencode

from settled.domain.kinds import HttpCall, KindSpec
from settled.domain.templates import lone_placeholder, lookup_path, render, substitute

Role = Literal["dispatch", "lookup", "compensate"]
_DEFAULT_BODY = {"dispatch": "json", "lookup": "none", "compensate": "json"}
# The compensation's own idempotency key: the operation key followed by this.
COMPENSATE_KEY_SUFFIX = "/compensate"


@dataclass(frozen=True)
class Values:
    """What placeholders stand for in one request."""

    operation_id: str  # the operation key (TENANT:operation_id with API keys)
    params: dict[str, Any]
    business_ref: str | None = None

    def as_mapping(self) -> dict[str, Any]:
        return {"operation_id": self.operation_id, "params": self.params, "business_ref": self.business_ref}


@dataclass(frozen=True)
class Outgoing:
    """One request, ready to send. `secrets` are the values it carries, to scrub from any answer."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)


def build(kind: KindSpec, role: Role, values: Values, secret: Callable[[str], str]) -> Outgoing:
    call = getattr(kind, role)
    assert isinstance(call, HttpCall), f"{role} of a kind without one"
    used: list[str] = []

    def read(name: str) -> str:
        value = secret(name)
        used.append(value)
        return value

    mapping = values.as_mapping()

    def header_text(template: str) -> str:
        return substitute(
            template,
            lambda name: (
                read(name.removeprefix("secret.")) if name.startswith("secret.") else _text(mapping, name)
            ),
        )

    headers: dict[str, str] = {}
    for name, template in [*kind.headers.items(), *call.headers.items()]:
        _set(headers, name, header_text(template))
    if kind.auth is not None:
        _set(headers, "Authorization", _authorization(kind, header_text))
    if kind.idempotency_header and role != "lookup":
        key = values.operation_id + (COMPENSATE_KEY_SUFFIX if role == "compensate" else "")
        _set(headers, kind.idempotency_header, key)
    url = render(call.url, mapping, escape=lambda value: quote(_plain(value), safe=""))
    content, content_type = _body(kind, call, role, mapping)
    if content_type and not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = content_type
    return Outgoing(call.method, url, headers, content, tuple(used))


def _authorization(kind: KindSpec, text: Callable[[str], str]) -> str:
    auth = kind.auth
    assert auth is not None
    if auth.type == "bearer":
        return f"Bearer {text(auth.token or '')}"
    pair = f"{text(auth.username or '')}:{text(auth.password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def _set(headers: dict[str, str], name: str, value: str) -> None:
    """Set a header, replacing one of the same name in another case (HTTP names are case-blind)."""
    for existing in [key for key in headers if key.lower() == name.lower()]:
        del headers[existing]
    headers[name] = value


def _plain(value: Any) -> str:
    """A value as text: booleans as JSON writes them, everything else as Python does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return (
        value
        if isinstance(value, str)
        else json.dumps(value)
        if isinstance(value, dict | list)
        else str(value)
    )


def _text(mapping: dict[str, Any], name: str) -> str:
    value = lookup_path(mapping, name)
    return "" if value is None else _plain(value)


def _fill(template: Any, mapping: dict[str, Any]) -> Any:
    """A `fields` value with its placeholders filled: a lone placeholder keeps its value's type."""
    if isinstance(template, str):
        lone = lone_placeholder(template)
        if lone is not None:
            return lookup_path(mapping, lone)
        return substitute(template, lambda name: _text(mapping, name))
    if isinstance(template, dict):
        return {key: _fill(item, mapping) for key, item in template.items()}
    if isinstance(template, list):
        return [_fill(item, mapping) for item in template]
    return template


def _body(
    kind: KindSpec, call: HttpCall, role: Role, mapping: dict[str, Any]
) -> tuple[bytes | None, str | None]:
    body = call.body or _DEFAULT_BODY[role]
    if body == "none":
        return None, None
    if body == "text":
        assert call.template is not None
        return substitute(call.template, lambda name: _text(mapping, name)).encode(), call.content_type
    if call.fields is not None:
        data = _fill(call.fields, mapping)
    elif role == "dispatch":
        data = dict(mapping["params"])
    else:
        data = {}
    if body == "form":
        return urlencode(form_pairs(data)).encode(), "application/x-www-form-urlencoded"
    if role == "dispatch" and kind.operation_field:
        data[kind.operation_field] = mapping["operation_id"]
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(), "application/json"


def form_pairs(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A form's fields: tables flattened as `a[b]`, lists as `a[0]`, booleans as true/false, null and
    absent values left out."""
    pairs: list[tuple[str, str]] = []

    def add(key: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, dict):
            for sub, item in value.items():
                add(f"{key}[{sub}]", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                add(f"{key}[{index}]", item)
        else:
            pairs.append((key, _plain(value)))

    for key, value in data.items():
        add(key, value)
    return pairs
