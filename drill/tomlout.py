"""Writing a kinds table back out as TOML (the subset kinds files use: strings, numbers, booleans,
arrays and tables), for the temporary kinds file of `--target-kind`."""

import json
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def value(item: Any) -> str:
    """One TOML value, inline. JSON's string escapes are all valid TOML basic-string escapes."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if not math.isfinite(item):
            raise ValueError(f"cannot write {item!r} to a kinds file")
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item)
    if isinstance(item, list):
        return "[" + ", ".join(value(element) for element in item) + "]"
    if isinstance(item, dict):
        return "{ " + ", ".join(f"{_key(k)} = {value(v)}" for k, v in item.items()) + " }" if item else "{}"
    raise ValueError(f"cannot write a {type(item).__name__} to a kinds file")


def kinds_file(tables: dict[str, dict[str, Any]]) -> str:
    """`[kinds.NAME]` per table, every key on its own line (nested tables inline)."""
    lines = []
    for name, table in tables.items():
        lines.append(f"[kinds.{_key(name)}]")
        lines += [f"{_key(k)} = {value(v)}" for k, v in table.items()]
        lines.append("")
    return "\n".join(lines)
