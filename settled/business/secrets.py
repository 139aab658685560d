"""Secrets of the kinds file (`{secret.NAME}`): read where a request is sent, when it is sent.

A value comes from the environment variable `NAME`, or from the file named by `NAME_FILE` (one
trailing newline dropped); `NAME` wins, and an empty value counts as not set. A value is never kept:
each request reads it anew, uses it for its headers, and the value goes nowhere else (not into a
history, a log line, an error message). `scrub` takes it out of any text that might echo it.
"""

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from settled.domain.kinds import KindSpec

MASK = "[secret]"


class SecretError(ValueError):
    """A secret a kind needs is not set or cannot be read; the message names the variable only."""


def read_secret(name: str, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    value = env.get(name, "")
    if value:
        return value
    file_name = env.get(f"{name}_FILE", "")
    if file_name:
        try:
            text = Path(file_name).read_text()
        except OSError as error:
            raise SecretError(f"{name}_FILE names a file that cannot be read ({error.strerror})") from None
        text = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
        if text:
            return text
    raise SecretError(f"the secret {name} is not set: set {name}, or {name}_FILE to a file holding it")


def secret_is_set(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the secret is configured at all (`NAME` or `NAME_FILE` not empty), for an optional
    secret such as a webhook's signing key: one that is set must then be readable (`read_secret`)."""
    env = os.environ if env is None else env
    return bool(env.get(name) or env.get(f"{name}_FILE"))


def check_secrets(kinds: Iterable[KindSpec], env: Mapping[str, str] | None = None) -> None:
    """Refuse to start a part that sends requests while a secret its kinds need is missing."""
    problems = []
    for kind in kinds:
        for name in sorted(kind.secret_names()):
            try:
                read_secret(name, env)
            except SecretError as error:
                problems.append(f"kind {kind.name}: {error}")
    if problems:
        raise SecretError("; ".join(problems))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value in it masked (a service's error message may echo a header)."""
    for value in secrets:
        if value:
            text = text.replace(value, MASK)
    return text
