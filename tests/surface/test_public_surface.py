"""The public surface stays as documented: every `from settled… import …` the README, the docs and the
examples show imports, the client's errors are where the docs say, and both ways to run the command
line answer."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("*.py")),
]
IMPORT = re.compile(r"from (settled(?:\.\w+)*) import ([\w, ]+)")


def documented_imports() -> list[tuple[str, str]]:
    found = {
        (module, name.strip())
        for path in DOCUMENTED
        for module, names in IMPORT.findall(path.read_text())
        for name in names.split(",")
        if name.strip()
    }
    return sorted(found)


def test_the_docs_show_the_public_faces() -> None:
    modules = {module for module, _ in documented_imports()}
    assert {"settled.client", "settled.handlers", "settled.codec", "settled.adapters.common"} <= modules


@pytest.mark.parametrize(("module", "name"), documented_imports())
def test_every_documented_import_works(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{module} has no {name}"


def test_the_client_and_its_errors() -> None:
    from settled.client import SettledAPIError, SettledClient, SettledError, SettledUnreachable

    assert issubclass(SettledAPIError, SettledError)
    assert issubclass(SettledUnreachable, SettledError)
    assert callable(SettledClient)


def test_new_key_makes_a_key_the_settings_accept() -> None:
    from settled.codec import new_key
    from settled.temporal.codec import parse_keys

    assert list(parse_keys(f"k1:{new_key()}")) == ["k1"]


@pytest.mark.parametrize(
    "command", [[str(Path(sys.executable).with_name("settled"))], [sys.executable, "-m", "settled"]]
)
def test_the_command_line_answers(command: list[str]) -> None:
    result = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "dev" in result.stdout and "worker" in result.stdout
