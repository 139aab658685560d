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
from typing import Any, Literal

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

from settled.states import State
from settled.templates import placeholders
from settled.urls import http_url_problem

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
_SAY_FIELDS = {"business_ref", "reason", "description", "operation_id"}
# Kind names reach tool names of voice frameworks and search attributes: keep them plain.
_KIND_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# An HTTP field name (RFC 9110 token): anything else fails at dispatch time, not at start-up.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_DOT_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")
# Durations beyond this overflow timers in the workflow; nobody means more than ten years.
_MAX_DURATION_S = 10 * 365 * 86400.0


class KindsFileError(ValueError):
    """The kinds file cannot be used; the message says where and why."""


class _Strict(BaseModel):
    # No NaN or infinity: a duration of `inf` would pass `gt=0` and break the workflow's timers.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class HttpCall(_Strict):
    method: HttpMethod = "POST"
    url: str

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        problem = http_url_problem(url)
        if problem:
            raise ValueError(problem)
        return url


class LookupCall(HttpCall):
    method: HttpMethod = "GET"
    authoritative: StrictBool = False


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
    dispatch: HttpCall
    lookup: LookupCall | None = None
    compensate: HttpCall | None = None
    idempotency_header: str | None = None
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
    # How long a settled action stays open for cancel (compensation) and presentation records.
    keep_open_after_settled_s: float = Field(default=7 * 86400.0, gt=0)
    # Params are redacted this long after the action settled (None: kept).
    redact_params_after_s: float | None = Field(default=None, ge=0)
    # The most requests of this kind open at its service at once, per worker process (docs/deployment.md).
    max_in_flight: int = Field(default=50, ge=1, le=10000)

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

    @model_validator(mode="after")
    def _consistent(self) -> "KindSpec":
        properties = set(self.params_schema.get("properties", {}))
        self._check_url("dispatch", self.dispatch.url, {"operation_id"}, properties)
        if self.lookup:
            self._check_url("lookup", self.lookup.url, {"operation_id"}, properties)
        if self.compensate:
            self._check_url("compensate", self.compensate.url, {"operation_id", "business_ref"}, properties)
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

    @staticmethod
    def _check_url(field: str, url: str, allowed: set[str], properties: set[str]) -> None:
        for name in placeholders(url):
            if name not in allowed and not _is_param(name, properties):
                raise ValueError(f"{field}.url: unknown placeholder {{{name}}}")

    @property
    def compensable(self) -> bool:
        return self.compensate is not None

    @property
    def deduplicates(self) -> bool:
        """The service deduplicates on the idempotency header, so a re-send is safe."""
        return self.idempotency_header is not None


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
