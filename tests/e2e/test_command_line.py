"""`settled` as a well-kept command-line tool, driven as the installed command (`.venv/bin/settled`):
`--version`; help for every command and flag, defaults shown; a reader that stops early (`| head`)
ends it quietly, as SIGPIPE ends a Unix tool, with no traceback; every error begins `settled:`."""

import argparse
import os
import re
import signal
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from settled.cli.main import TOOLS, parser

from settled.runtime.stack import Stack
from tests.helpers import BOOKING, create

SETTLED = str(Path(sys.executable).parent / "settled")
DEADLINE_S = 120.0


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SETTLED, *args], env=env, capture_output=True, text=True, timeout=DEADLINE_S)


def _commands() -> dict[str, object]:
    root = parser()
    (sub,) = [action for action in root._actions if action.dest == "command"]
    return dict(sub.choices)  # type: ignore[attr-defined]


def help_entries(text: str) -> dict[str, str]:
    """argparse's help, read back: each flag or positional with the help text printed for it."""
    entries: dict[str, str] = {}
    current: str | None = None
    in_section = False
    for line in text.splitlines():
        if re.match(r"^(options|positional arguments|commands):$", line):
            in_section, current = True, None
        elif not line.strip():
            in_section, current = False, None
        elif in_section and re.match(r"^ {2,4}\S", line):
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            invocation, said = parts[0], parts[1] if len(parts) > 1 else ""
            words = invocation.replace(",", " ").split()
            current = next((word for word in words if word.startswith("--")), words[0])
            entries[current] = said
        elif in_section and current is not None:
            entries[current] = (entries[current] + " " + line.strip()).strip()
    return entries


def test_version_answers_the_installed_version() -> None:
    result = run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"settled {version('settled')}"


def test_the_top_level_help_is_written_for_users() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "settled dev" in result.stdout and "settled doctor" in result.stdout
    assert "SETTLED_CONFIG" in result.stdout and "--version" in result.stdout
    assert "Thin: each command hands over" not in result.stdout  # not the module's docstring
    listed = help_entries(result.stdout)
    for name in _commands():
        assert listed.get(name), f"{name} is not listed with what it does"
    bare = run()
    assert bare.returncode == 2 and "settled dev" in bare.stderr and "Traceback" not in bare.stderr


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_command_and_flag_has_help_and_shows_its_default(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    entries = help_entries(result.stdout)
    assert entries, result.stdout
    for name, said in entries.items():
        assert said, f"settled {command} --help: {name} has no help text"
    if command in TOOLS:  # their own parsers; the entries above are what they print
        return
    sub = _commands()[command]
    for action in sub._actions:  # type: ignore[attr-defined]
        if not action.option_strings or action.dest == "help":
            continue
        flag = action.option_strings[-1]
        said = entries.get(flag)
        assert said, f"settled {command} --help does not list {flag}"
        meaningful = action.default not in (None, False, []) and action.default is not argparse.SUPPRESS
        if meaningful:
            assert "default" in said, f"settled {command} --help: {flag} does not show its default"
            if "(default: " in said:
                assert f"(default: {action.default})" in said.replace("\n", " "), said


def _closed_reader(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command with its stdout a pipe whose reader is already gone: its first write meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [SETTLED, *args], stdout=write_end, stderr=subprocess.PIPE, env=env, text=True, timeout=DEADLINE_S
        )
    finally:
        os.close(write_end)


def _into_head(args: list[str], env: dict[str, str]) -> tuple[bytes, int, str]:
    """`settled ARGS | head -c 10`, a real pipeline."""
    writer = subprocess.Popen([SETTLED, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    head = subprocess.Popen(["head", "-c", "10"], stdin=writer.stdout, stdout=subprocess.PIPE)
    assert writer.stdout is not None and writer.stderr is not None
    writer.stdout.close()  # head alone reads it now
    read, _ = head.communicate(timeout=DEADLINE_S)
    stderr = writer.stderr.read().decode()
    return read, writer.wait(timeout=DEADLINE_S), stderr


@pytest.mark.parametrize("args", [["list", "--json"], ["doctor", "--json"], ["doctor"], ["list"]])
def test_a_reader_that_stops_early_ends_it_quietly(api: httpx.Client, stack: Stack, args: list[str]) -> None:
    create(api, "room_booking", BOOKING)  # something to list
    env = stack.env()
    closed = _closed_reader(args, env)
    assert "Traceback" not in closed.stderr and "BrokenPipe" not in closed.stderr, closed.stderr
    assert closed.stderr == ""
    # As a Unix tool ends: killed by SIGPIPE (the shell's 141), which `set -o pipefail` sees as a pipe.
    assert closed.returncode == -signal.SIGPIPE

    read, code, stderr = _into_head(args, env)
    assert len(read) == 10
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert code in (0, -signal.SIGPIPE)


def test_token_errors_begin_with_settled(stack: Stack) -> None:
    env = {name: value for name, value in stack.env().items() if name != "SETTLED_API_KEYS"}
    unsigned = run("token", "conv-1", "--tenant", "acme", env=env)
    assert unsigned.returncode == 2
    assert unsigned.stderr.startswith("settled: no API keys are configured"), unsigned.stderr
    missing = run("token", "conv-1", env=env)
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[-1] == "settled: token: the following arguments are required: --tenant"
    keyed = {**env, "SETTLED_API_KEYS": "acme:sk-test-0123456789abcdef"}
    too_long = run("token", "conv-1", "--tenant", "acme", "--ttl", "1000000", env=keyed)
    assert too_long.returncode == 2 and too_long.stderr.startswith("settled: "), too_long.stderr
    signed = run("token", "conv-1", "--tenant", "acme", env=keyed)
    assert signed.returncode == 0 and len(signed.stdout.split()) == 1, signed.stderr
