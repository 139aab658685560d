"""Action kinds: the business-system contract, one `[kinds.NAME]` table each (docs/reference.md).

A kinds file is validated whole at start-up; every error names the file, the kind and the field.
The `KindSpec` of an action is copied into its workflow when it starts, so a running action keeps
the contract it was requested under even if the file changes later.
"""

import functools
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import jmespath
import jsonschema
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from settled.domain.states import State
from settled.domain.templates import placeholders, substitute
from settled.domain.urls import http_url_problem

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
_SAY_FIELDS = {"business_ref", "reason", "description", "operation_id"}
# Kind names reach tool names of voice frameworks and search attributes: keep them plain.
_KIND_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# An HTTP field name (RFC 9110 token): anything else fails at dispatch time, not at start-up.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_KEYED_MESSAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\[\]-]*: ")
_DOT_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")
# Durations beyond this overflow timers in the workflow; nobody means more than ten years.
_MAX_DURATION_S = 10 * 365 * 86400.0


class KindsFileError(ValueError):
    """The kinds file cannot be used; the message says where and why."""


class _Strict(BaseModel):
    # No NaN or infinity: a duration of `inf` would pass `gt=0` and break the workflow's timers.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Body = Literal["json", "form", "text", "none"]
DispatchAnswer = Literal["applied", "rejected", "unknown"]
LookupAnswer = Literal["applied", "not_applied", "unknown"]
# Where a template may stand, and which placeholders it may use there (docs/reference.md).
_REQUEST_VALUES = {"operation_id"}
_COMPENSATE_VALUES = {"operation_id", "business_ref"}
_SECRET = re.compile(r"^secret\.[A-Za-z_][A-Za-z0-9_]*$")


class HttpCall(_Strict):
    """One HTTP request of a kind: where it goes, what it carries, and what its statuses mean."""

    method: HttpMethod = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    # None: the request's own default (dispatch json, lookup none, compensate json `{}`).
    body: Body | None = None
    fields: dict[str, Any] | None = None
    template: str | None = None
    content_type: str | None = None
    statuses: dict[int, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        problem = http_url_problem(url)
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        return _checked_headers(headers)

    @field_validator("statuses")
    @classmethod
    def _status_codes(cls, statuses: dict[int, str]) -> dict[int, str]:
        for code in statuses:
            if not 100 <= code <= 599:
                raise ValueError(f"{code} is not an HTTP status code (100-599)")
        return statuses


class LookupCall(HttpCall):
    method: HttpMethod = "GET"
    authoritative: StrictBool = False
    # JMESPath over the 200 body: what is ours in it (falsy: not found, as a 404).
    found: str | None = None
    # JMESPath over the found object: true once the write was reversed.
    reversed_when: str | None = None


class Auth(_Strict):
    """Credentials of a kind's every request; values are templates of `{secret.NAME}`."""

    type: Literal["bearer", "basic"]
    token: str | None = None
    username: str | None = None
    password: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> "Auth":
        wanted = {"token"} if self.type == "bearer" else {"username", "password"}
        given = {name for name in ("token", "username", "password") if getattr(self, name) is not None}
        if given != wanted:
            raise ValueError(f"{self.type} auth takes {' and '.join(sorted(wanted))}, nothing else")
        return self


class HandlerTraits(_Strict):
    """What a code kind's handler object declares, read when it is imported (settled.business.code)
    and carried with the kind, so the workflow decides without importing it."""

    deduplicates: bool = False
    authoritative_lookup: bool = False
    lookup: bool = False
    compensate: bool = False


@functools.lru_cache(maxsize=256)
def _schema_problem(schema_json: str) -> str | None:
    """Why a params schema is not valid JSON Schema, or None. Cached: a kind travels inside every
    action's workflow input and is validated on each decode, and the meta-schema check is costly."""
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(schema_json))
    except jsonschema.SchemaError as error:
        return error.message
    return None


class KindSpec(_Strict):
    name: str
    description: str
    requires_authorization: StrictBool = False
    params_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # An HTTP kind has `dispatch` (and the keys that shape and read its requests); a code kind names a
    # Python object instead (`handler = "module:attr"`, settled.handlers), never both.
    dispatch: HttpCall | None = None
    lookup: LookupCall | None = None
    compensate: HttpCall | None = None
    handler: str | None = None
    handler_traits: HandlerTraits | None = None  # filled in where the handler is imported, never by the file
    auth: Auth | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # JMESPath over a 2xx dispatch body or a lookup's found object: final or not (accepted is not done).
    confirmed_when: str | None = None
    failed_when: str | None = None
    idempotency_header: str | None = None
    # How long the service remembers an idempotency key (None: for good enough).
    idempotency_window_s: float | None = Field(default=None, gt=0)
    # The dispatch cannot apply twice by construction (a PUT to a URL named by the operation key).
    idempotent: StrictBool = False
    operation_field: str | None = None
    reference_field: str = "id"
    timeout_s: float = Field(default=5.0, gt=0, le=300)
    say: dict[State, str] = Field(default_factory=dict)
    # Reconciliation of `unknown` (docs/reference.md); the first lookup waits the initial interval.
    reconcile_initial_interval_s: float = Field(default=1.0, gt=0)
    reconcile_max_interval_s: float = Field(default=60.0, gt=0)
    attention_after_s: float = Field(default=300.0, ge=0)
    give_up_after_s: float = Field(default=604800.0, gt=0)
    # How long after a send the service may still commit it (its own request deadline plus the lag of
    # the replicas its lookups read): an authoritative 404 made sooner proves nothing.
    commit_horizon_s: float = Field(default=30.0, ge=0)
    # A connection that was never made is retried with this backoff (nothing reached the service).
    connect_retry_max_interval_s: float = Field(default=30.0, gt=0)
    # How long a settled action still accepts late controls: a cancel (compensation), a presentation.
    keep_open_after_settled_s: float = Field(default=7 * 86400.0, gt=0)
    # How long a settled action's run lingers before it closes (runs since CLOSING_REVISION), so the
    # `presented` that follows a spoken confirmation finds it open; a later control within
    # `keep_open_after_settled_s` opens it again (settled.gateway.reopening).
    close_after_settled_s: float = Field(default=60.0, gt=0)
    # Params are redacted this long after the action settled (None: kept).
    redact_params_after_s: float | None = Field(default=None, ge=0)
    # The most requests of this kind open at its service at once, per worker process (docs/deployment.md).
    max_in_flight: int = Field(default=50, ge=1, le=10000)
    # How soon after its request an action of this kind should reach a verified outcome: the on-call
    # objective its alert compares against (docs/operations.md); None: no objective.
    outcome_objective_s: float | None = Field(default=None, gt=0)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if not _KIND_NAME.fullmatch(name):
            raise ValueError("a kind's name must be 1-64 of A-Z a-z 0-9 _ -")
        return name

    @field_validator("idempotency_header")
    @classmethod
    def _header_name(cls, header: str | None) -> str | None:
        if header is not None and not _HEADER_NAME.fullmatch(header):
            raise ValueError(f"{header!r} is not an HTTP header name")
        return header

    @field_validator("operation_field", "reference_field")
    @classmethod
    def _dot_path(cls, path: str | None) -> str | None:
        if path is not None and not _DOT_PATH.fullmatch(path):
            raise ValueError(f"{path!r} is not a field name or dot path (e.g. id, data.id)")
        return path

    @field_validator("params_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        problem = _schema_problem(json.dumps(schema, sort_keys=True))
        if problem:
            raise ValueError(f"not a valid JSON Schema: {problem}")
        if schema.get("type") != "object":
            raise ValueError('must describe a JSON object (type = "object")')
        return schema

    @field_validator("handler")
    @classmethod
    def _handler_name(cls, handler: str | None) -> str | None:
        if handler is not None and not _HANDLER.fullmatch(handler):
            raise ValueError(f"{handler!r} is not module:attribute (e.g. my_app.payments:refund)")
        return handler

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        return _checked_headers(headers)

    @model_validator(mode="after")
    def _consistent(self) -> "KindSpec":
        properties = set(self.params_schema.get("properties", {}))
        if self.handler is not None:
            http_keys = [key for key in _HTTP_KEYS if getattr(self, key) not in (None, {}, False)]
            if http_keys:
                raise ValueError(f"handler: a code kind takes no HTTP keys ({', '.join(http_keys)})")
        elif self.dispatch is None:
            raise ValueError("dispatch: missing (required), or a handler for a code kind")
        _check_templates(self, properties)
        if (self.confirmed_when or self.failed_when) and self.lookup is None and self.handler is None:
            raise ValueError(
                "confirmed_when/failed_when need a lookup: an accepted, unfinished request could never "
                "be seen to finish"
            )
        for state, template in self.say.items():
            for name in placeholders(template):
                if name not in _SAY_FIELDS and not _is_param(name, properties):
                    raise ValueError(f"say.{state.value}: unknown placeholder {{{name}}}")
        if self.commit_horizon_s >= self.give_up_after_s:
            raise ValueError(
                "commit_horizon_s must be shorter than give_up_after_s: automatic lookups would stop "
                "before a 404 could prove anything"
            )
        if self.reconcile_initial_interval_s > self.reconcile_max_interval_s:
            raise ValueError("reconcile_initial_interval_s is larger than reconcile_max_interval_s")
        for name, value in self:
            if name.endswith("_s") and isinstance(value, float) and value > _MAX_DURATION_S:
                raise ValueError(f"{name}: at most {_MAX_DURATION_S:.0f} seconds (ten years)")
        return self

    # -- what the service guarantees (HTTP keys, or the handler's traits) ------------------------

    @property
    def compensable(self) -> bool:
        if self.handler is not None:
            return self.handler_traits is not None and self.handler_traits.compensate
        return self.compensate is not None

    @property
    def has_lookup(self) -> bool:
        if self.handler is not None:
            return self.handler_traits is not None and self.handler_traits.lookup
        return self.lookup is not None

    @property
    def authoritative_lookup(self) -> bool:
        if self.handler is not None:
            return (
                self.has_lookup
                and self.handler_traits is not None
                and self.handler_traits.authoritative_lookup
            )
        return self.lookup is not None and self.lookup.authoritative

    @property
    def deduplicates(self) -> bool:
        """A re-sent dispatch cannot apply twice: the service deduplicates on the operation key (within
        `idempotency_window_s` of the first send, which the state machine checks), or the dispatch is
        idempotent by construction."""
        if self.handler is not None:
            return self.handler_traits is not None and self.handler_traits.deduplicates
        return self.idempotency_header is not None or self.idempotent

    @property
    def compensation_deduplicates(self) -> bool:
        """A re-sent compensation cannot apply twice: it carries its own idempotency key, the handler
        deduplicates, or it is a DELETE or PUT of the record itself (a reversal is a write too)."""
        if self.handler is not None:
            return self.compensable and self.handler_traits is not None and self.handler_traits.deduplicates
        return self.compensate is not None and (
            self.idempotency_header is not None or self.compensate.method in ("DELETE", "PUT")
        )

    @property
    def answers_unfinished(self) -> bool:
        """The kind can tell an accepted, unfinished request from a final one."""
        return self.handler is not None or bool(self.confirmed_when or self.failed_when)

    def secret_names(self) -> set[str]:
        """The secrets this kind's requests need (`{secret.NAME}` in auth and headers)."""
        templates = list(self.headers.values())
        if self.auth is not None:
            templates += [
                value for value in (self.auth.token, self.auth.username, self.auth.password) if value
            ]
        for call in (self.dispatch, self.lookup, self.compensate):
            if call is not None:
                templates += call.headers.values()
        return {
            name.removeprefix("secret.")
            for template in templates
            for name in placeholders(template)
            if name.startswith("secret.")
        }


# The keys of an HTTP kind, which a code kind must not have.
_HTTP_KEYS = (
    "dispatch", "lookup", "compensate", "auth", "headers", "confirmed_when", "failed_when",
    "idempotency_header", "idempotency_window_s", "idempotent", "operation_field",
)  # fmt: skip
_HANDLER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def _checked_headers(headers: dict[str, str]) -> dict[str, str]:
    for name in headers:
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an HTTP header name")
    return headers


def _check_templates(kind: KindSpec, properties: set[str]) -> None:
    """Every placeholder of every request template names something that exists where it stands: the
    operation key, params of the schema, the reference (compensate), a secret (auth and headers only)."""

    def check(where: str, template: str, allowed: set[str], secrets: bool = False) -> None:
        for name in placeholders(template):
            if _SECRET.fullmatch(name):
                if not secrets:
                    raise ValueError(f"{where}: {{{name}}} may stand only in auth and header values")
            elif name not in allowed and not _is_param(name, properties):
                raise ValueError(f"{where}: unknown placeholder {{{name}}}")

    def check_value(where: str, value: Any, allowed: set[str]) -> None:
        if isinstance(value, str):
            check(where, value, allowed)
        elif isinstance(value, dict):
            for key, item in value.items():
                check_value(f"{where}.{key}", item, allowed)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                check_value(f"{where}[{index}]", item, allowed)

    for name, value in kind.headers.items():
        check(f"headers.{name}", value, _REQUEST_VALUES, secrets=True)
    if kind.auth is not None:
        for name in ("token", "username", "password"):
            value = getattr(kind.auth, name)
            if value is not None:
                check(f"auth.{name}", value, set(), secrets=True)
    for expression_key in ("confirmed_when", "failed_when"):
        expression = getattr(kind, expression_key)
        if expression is not None:
            check(expression_key, expression, _REQUEST_VALUES)
            _check_expression(expression_key, expression)
    for call_name, call, allowed, default_body in (
        ("dispatch", kind.dispatch, _REQUEST_VALUES, "json"),
        ("lookup", kind.lookup, _REQUEST_VALUES, "none"),
        ("compensate", kind.compensate, _COMPENSATE_VALUES, "json"),
    ):
        if call is None:
            continue
        check(f"{call_name}.url", call.url, allowed)
        for name, value in call.headers.items():
            check(f"{call_name}.headers.{name}", value, allowed, secrets=True)
        body = call.body or default_body
        if call.fields is not None:
            if body not in ("json", "form"):
                raise ValueError(f"{call_name}.fields: only a json or form body has fields (body = {body!r})")
            check_value(f"{call_name}.fields", call.fields, allowed)
        if body == "text":
            if call.template is None or call.content_type is None:
                raise ValueError(f"{call_name}: a text body needs template and content_type")
            check(f"{call_name}.template", call.template, allowed)
        elif call.template is not None or call.content_type is not None:
            raise ValueError(f'{call_name}.template: only a text body (body = "text") has a template')
        answers = {"lookup": get_args(LookupAnswer)}.get(call_name, get_args(DispatchAnswer))
        for code, answer in call.statuses.items():
            if answer not in answers:
                raise ValueError(
                    f"{call_name}.statuses.{code}: {answer!r} is not one of {', '.join(answers)}"
                )
        if isinstance(call, LookupCall):
            for expression_key in ("found", "reversed_when"):
                expression = getattr(call, expression_key)
                if expression is not None:
                    check(f"lookup.{expression_key}", expression, allowed)
                    _check_expression(f"lookup.{expression_key}", expression)


@functools.lru_cache(maxsize=256)
def _check_expression(where: str, expression: str) -> None:
    """A JMESPath expression compiles once its placeholders stand as JSON literals (as when sent)."""
    try:
        jmespath.compile(substitute(expression, lambda _: '`"x"`'))
    except jmespath.exceptions.JMESPathError as error:
        raise ValueError(f"{where}: not a valid JMESPath expression ({error})") from None


def _is_param(name: str, properties: set[str]) -> bool:
    head, _, rest = name.partition(".")
    return head == "params" and rest.split(".")[0] in properties


class Kinds:
    """The kinds of one configuration, by name."""

    def __init__(self, specs: dict[str, KindSpec], source: str) -> None:
        self._specs = specs
        self.source = source

    def get(self, name: str) -> KindSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._specs.values())


def parse_kinds(text: str, source: str) -> Kinds:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise KindsFileError(f"{source}: not valid TOML: {error}") from None
    unknown_top = set(document) - {"kinds"}
    if unknown_top:
        raise KindsFileError(
            f"{source}: unknown top-level table(s) {sorted(unknown_top)}; expected [kinds.NAME]"
        )
    tables = document.get("kinds")
    if not isinstance(tables, dict) or not tables:
        raise KindsFileError(f"{source}: no kinds: add at least one [kinds.NAME] table")
    specs: dict[str, KindSpec] = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise KindsFileError(f"{source}: kinds.{name}: must be a table")
        if "name" in table:
            raise KindsFileError(f"{source}: kinds.{name}.name: unknown key (the name is the table's)")
        if "handler_traits" in table:
            raise KindsFileError(f"{source}: kinds.{name}.handler_traits: unknown key")
        try:
            specs[name] = KindSpec.model_validate({**table, "name": name})
        except ValidationError as error:
            raise KindsFileError(f"{source}: kinds.{name}{_describe(error.errors()[0])}") from None
    return Kinds(specs, source)


def _describe(error: ErrorDetails) -> str:
    """`.field: problem` in the words of a kinds file, not of pydantic."""
    field = ".".join(str(part) for part in error["loc"] if part != "[key]")
    where = f".{field}" if field else ""
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key"
    if error["type"] == "missing":
        return f"{where}: missing (required)"
    message = error["msg"].removeprefix("Value error, ")
    if field == "name":  # the table's name, not a key in it
        return f": {message}"
    if not field and _KEYED_MESSAGE.match(message):  # a check across keys, naming the key it refuses
        return f".{message}"
    return f"{where}: {message}"


# In a kinds template, where the sandbox's URL goes (`Stack.on_free_ports` fills in its own).
SANDBOX_URL = "@SANDBOX_URL@"


@dataclass(frozen=True)
class Variant:
    """A kind derived from a built-in sandbox kind: `base`'s table (None: an empty one) with the keys
    in `changes` set, and those changed to None removed. A harness states only what differs."""

    base: str | None
    changes: Mapping[str, Any] = field(default_factory=dict)

    def but(self, **changes: Any) -> "Variant":
        """The same variant with more keys changed."""
        return Variant(self.base, {**self.changes, **changes})


# The sandbox kinds' params as the test, soak and bench kinds declare them: the same params, without
# the checks on values and on extra keys.
PLAIN_BOOKING_PARAMS: dict[str, Any] = {
    "type": "object",
    "required": ["room", "day"],
    "properties": {"room": {"type": "string"}, "day": {"type": "string"}},
}
PLAIN_REFUND_PARAMS: dict[str, Any] = {
    "type": "object",
    "required": ["order_id", "amount", "currency"],
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "currency": {"type": "string"},
    },
}


def sandbox_kinds_text(sandbox_url: str, variants: Mapping[str, Variant] | None = None) -> str:
    """The built-in sandbox kinds as a kinds file, pointed at `sandbox_url` (`SANDBOX_URL` keeps the
    placeholder). With `variants`, the kinds named there instead, each derived from a sandbox kind."""
    template = resources.files("settled").joinpath("sandbox_kinds.toml").read_text()
    if variants is not None:
        tables = tomllib.loads(template)["kinds"]
        template = kinds_toml({name: _derive(tables, variant) for name, variant in variants.items()})
    return template.replace(SANDBOX_URL, sandbox_url.rstrip("/"))


def _derive(tables: dict[str, dict[str, Any]], variant: Variant) -> dict[str, Any]:
    table = dict(tables[variant.base]) if variant.base is not None else {}
    for key, value in variant.changes.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _toml_value(item: Any) -> str:
    """One TOML value, inline: the subset kinds files use. JSON's string escapes are all TOML's."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, float) and not math.isfinite(item):
        raise ValueError(f"cannot write {item!r} to a kinds file")
    if isinstance(item, int | float | str):
        return json.dumps(item)
    if isinstance(item, list):
        return "[" + ", ".join(_toml_value(element) for element in item) + "]"
    if isinstance(item, dict):
        pairs = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in item.items())
        return "{ " + pairs + " }" if pairs else "{}"
    raise ValueError(f"cannot write a {type(item).__name__} to a kinds file")


def kinds_toml(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """Tables of kinds as a kinds file: `[kinds.NAME]` per table, a key a line (nested tables inline)."""
    lines = []
    for name, table in tables.items():
        lines.append(f"[kinds.{_toml_key(name)}]")
        lines += [f"{_toml_key(key)} = {_toml_value(value)}" for key, value in table.items()]
        lines.append("")
    return "\n".join(lines)


def load_kinds(path: str | Path | None, sandbox_url: str = "http://127.0.0.1:8100") -> Kinds:
    """The kinds file at `path`, or the sandbox kinds pointed at `sandbox_url`."""
    if path is None:
        return parse_kinds(sandbox_kinds_text(sandbox_url), "sandbox kinds")
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as error:
        raise KindsFileError(f"{file}: cannot read the kinds file: {error.strerror}") from None
    return parse_kinds(text, str(file))
