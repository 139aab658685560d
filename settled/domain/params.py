"""Params are checked against the kind's JSON Schema before anything is recorded."""

import re
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from settled.domain.canonical import not_text
from settled.domain.kinds import KindSpec

_QUOTED = re.compile(r"'([^']+)'")


class InvalidParams(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# Why a string that `not_text` finds is refused.
NOT_TEXT = "not valid Unicode text (a lone surrogate)"


def validate_text(params: dict[str, Any]) -> None:
    """Params are JSON of valid Unicode text, whatever the kind: what cannot be written as UTF-8 can be
    neither recorded nor sent."""
    field = not_text(params)
    if field is not None:
        raise InvalidParams(field, NOT_TEXT)


def validate_params(kind: KindSpec, params: dict[str, Any]) -> None:
    validate_text(params)
    validator = jsonschema.Draft202012Validator(kind.params_schema)
    error = best_match(validator.iter_errors(params))
    if error is None:
        return
    path = ["params", *(str(part) for part in error.absolute_path)]
    if error.validator in ("required", "additionalProperties"):
        # The offending property is named in the message, not in the path.
        named = _QUOTED.search(error.message)
        if named:
            path.append(named.group(1))
    raise InvalidParams(".".join(path), error.message)
