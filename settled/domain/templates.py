"""`{name}` / `{params.field}` placeholders, for request templates and customer-facing sentences.

Deliberately not `str.format`: a kinds file is configuration, and format strings can reach
attributes of the objects they are given. `{{` and `}}` stand for literal braces.
"""

import re
from collections.abc import Callable, Mapping
from typing import Any

_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"
# An escaped brace, or a placeholder: one pass, so `{{x}}` is the text `{x}`, not a placeholder.
_TOKEN = re.compile(r"\{\{|\}\}|\{(" + _NAME + r")\}")
_LONE = re.compile(r"^\{(" + _NAME + r")\}$")


def placeholders(template: str) -> set[str]:
    return {match.group(1) for match in _TOKEN.finditer(template) if match.group(1)}


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


def substitute(template: str, text_for: Callable[[str], str]) -> str:
    """Replace each placeholder with `text_for(its name)`, and each escaped brace with the brace."""

    def one(match: re.Match[str]) -> str:
        return match.group(0)[0] if match.group(1) is None else text_for(match.group(1))

    return _TOKEN.sub(one, template)


def render(template: str, values: Mapping[str, Any], escape: Callable[[Any], str] = str) -> str:
    """Replace each placeholder with its value, `escape`d (a missing one becomes empty text)."""

    def text_for(name: str) -> str:
        value = lookup_path(values, name)
        return "" if value is None else escape(value)

    return substitute(template, text_for)


def lone_placeholder(template: str) -> str | None:
    """The name, when the template is exactly one placeholder (its value then keeps its type)."""
    matched = _LONE.fullmatch(template)
    return matched.group(1) if matched else None
