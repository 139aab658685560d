"""`{name}` / `{params.field}` placeholders, for URLs and customer-facing sentences.

Deliberately not `str.format`: a kinds file is configuration, and format strings can reach
attributes of the objects they are given.
"""

import re
from collections.abc import Callable, Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def lookup_path(data: Any, path: str) -> Any:
    """Follow a dot path (`data.booking.id`) through nested mappings; None when absent."""
    current = data
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    return current


def render(template: str, values: Mapping[str, Any], escape: Callable[[str], str] = str) -> str:
    """Replace each placeholder with its value (a missing one becomes empty text)."""

    def substitute(match: re.Match[str]) -> str:
        value = lookup_path(values, match.group(1))
        return "" if value is None else escape(str(value))

    return _PLACEHOLDER.sub(substitute, template)
