"""Params for a user's kind when none are given: built from its JSON Schema (examples, defaults,
enums, then simple values that satisfy the usual constraints), and a change of one field for C6."""

from typing import Any


class NoSample(ValueError):
    """The schema asks for something a simple value cannot satisfy; the user must give params."""


def _value(name: str, schema: dict[str, Any]) -> Any:
    for hint in ("examples", "enum"):
        if schema.get(hint):
            return schema[hint][0]
    if "default" in schema or "const" in schema:
        return schema.get("const", schema.get("default"))
    kind = schema.get("type")
    if kind == "string" and "pattern" not in schema and "format" not in schema:
        return f"drill-{name}".ljust(int(schema.get("minLength", 0)), "x")
    if kind in ("number", "integer"):
        floor = max(float(schema.get("minimum", 1)), float(schema.get("exclusiveMinimum", 0)) + 1)
        return int(floor) if kind == "integer" else round(floor + 0.5, 2)
    if kind == "boolean":
        return True
    raise NoSample(f"cannot make up a value for {name!r} ({schema}); pass --params")


def sample(schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    wanted = schema.get("required", list(properties))
    return {name: _value(name, properties.get(name, {})) for name in wanted}


def changed(schema: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The same params with one field changed: the first number grows, else the first free string."""
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, current in params.items():
        spec = properties.get(name, {})
        if isinstance(current, bool) or "enum" in spec or "const" in spec:
            continue
        if isinstance(current, int | float) and "maximum" not in spec:
            return {**params, name: current + 1}
    for name, current in params.items():
        spec = properties.get(name, {})
        if isinstance(current, str) and not {"enum", "const", "pattern", "format", "maxLength"} & set(spec):
            return {**params, name: f"{current}-changed"}
    raise NoSample("cannot make up a changed value for any param; pass --changed-params")
