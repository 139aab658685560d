"""The docs' examples run: every whole Python, TypeScript or shell example in the README and docs/ is
run by a test against a stack as `make dev` starts it (its ports substituted), and the answers it shows
hold; a code block that is only a piece of a program is marked `<!-- fragment: why -->` on the line
right before it (docs/testing.md). A whole example that is neither run nor marked fails here."""

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from settled.runtime.stack import Ports, Stack
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKDOWN = MarkdownIt("commonmark")
# The languages of examples: what a reader would paste into a terminal or a program.
LANGUAGES = {
    "sh": "sh",
    "bash": "sh",
    "shell": "sh",
    "console": "sh",
    "python": "python",
    "py": "python",
    "ts": "ts",
    "typescript": "ts",
    "js": "ts",
    "javascript": "ts",
}
FRAGMENT = re.compile(r"<!--\s*fragment(?::\s*(?P<why>.*?))?\s*-->\s*", re.DOTALL)


@dataclass(frozen=True)
class Example:
    page: str  # from the top of the tree
    line: int
    language: str
    code: str
    fragment: str | None  # why it is only a piece of a program, when it is marked so

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def is_(self, page: str, start: str) -> bool:
        return self.page == page and self.code.lstrip().startswith(start)


def examples_in(page: str, source: str) -> list[Example]:
    found = []
    parsed = MARKDOWN.parse(source)
    for index, token in enumerate(parsed):
        language = LANGUAGES.get(token.info.strip().split(" ")[0].lower()) if token.type == "fence" else None
        if language is None or token.map is None:
            continue
        before = parsed[index - 1] if index else None
        marked = (
            FRAGMENT.fullmatch(before.content)
            if before is not None
            and before.type == "html_block"
            and before.map == [token.map[0] - 1, token.map[0]]
            else None
        )
        fragment = (marked.group("why") or "marked") if marked else None
        found.append(Example(page, token.map[0] + 1, language, token.content, fragment))
    return found


@cache
def all_examples() -> tuple[Example, ...]:
    return tuple(
        example for page in PAGES for example in examples_in(str(page.relative_to(ROOT)), page.read_text())
    )


def example(page: str, start: str) -> Example:
    """The one example of `page` whose code starts with `start`."""
    matching = [found for found in all_examples() if found.is_(page, start)]
    assert len(matching) == 1, f"{len(matching)} examples of {page} start with {start!r}"
    return matching[0]


# The examples this module runs, by page and the start of their code.
README_TOUR = ("README.md", "# 1. The assistant requests a booking.")
README_LOST_RESPONSE = ("README.md", "curl -s -XPOST localhost:8100/_sandbox/faults")
MCP_CLIENT = ("docs/mcp.md", "import asyncio\n\nfrom mcp import Client")
VAPI_CURL = ("docs/platforms.md", "curl -s -XPOST localhost:8000/v1/platforms/vapi")
CHECK_KINDS = ("docs/connecting.md", "settled check-kinds examples/kinds/payments.toml")
PROFILE_LOAD = ("docs/performance/profile.md", "import asyncio, time, httpx")
RUN_HERE = {README_TOUR, README_LOST_RESPONSE, MCP_CLIENT, VAPI_CURL, CHECK_KINDS, PROFILE_LOAD}
# Whole examples another test runs: (page, start of the code) -> that test.
RUN_ELSEWHERE: dict[tuple[str, str], str] = {
    ("docs/gemini-live.md", "from google.adk.agents import Agent"): "tests/adapters/test_google_adk.py",
}


def unaccounted(examples: list[Example]) -> list[str]:
    known = RUN_HERE | set(RUN_ELSEWHERE)
    return [
        f"{found.where} ({found.language}): neither run by a test nor marked <!-- fragment: why -->"
        for found in examples
        if found.fragment is None and not any(found.is_(page, start) for page, start in known)
    ]


@pytest.mark.parametrize(
    "page",
    sorted({found.page for found in all_examples()}),
)
def test_every_whole_example_is_run_or_marked_a_fragment(page: str) -> None:
    assert unaccounted([found for found in all_examples() if found.page == page]) == []


@pytest.mark.parametrize(("page", "start"), sorted(RUN_HERE | set(RUN_ELSEWHERE)))
def test_every_example_said_to_run_is_a_whole_one(page: str, start: str) -> None:
    assert example(page, start).fragment is None


def test_the_check_catches_an_unmarked_example() -> None:
    source = (
        "# A page\n\n```python\nprint(1)\n```\n\n<!-- fragment: needs a model -->\n```sh\nmake dev\n```\n\n"
        "<!-- fragment -->\n\n```ts\nconst x = 1;\n```\n\n```toml\n[data]\n```\n"
    )
    found = examples_in("docs/a-page.md", source)
    assert [(e.line, e.language, e.fragment) for e in found] == [
        (3, "python", None),
        (8, "sh", "needs a model"),
        (14, "ts", None),  # a blank line between them: not marked
    ]
    assert unaccounted(found) == [
        "docs/a-page.md:3 (python): neither run by a test nor marked <!-- fragment: why -->",
        "docs/a-page.md:14 (ts): neither run by a test nor marked <!-- fragment: why -->",
    ]


# -- Running them ---------------------------------------------------------------------------------------

# The ports `settled dev` listens on by default (and those docs/performance/profile.md starts it on).
LOOPBACK = re.compile(r"\b(localhost|127\.0\.0\.1):(\d+)\b")


def on_ports(text: str, stack: Stack) -> str:
    """The example with the stack's ports for the dev stack's: an address on any other port is a
    mistake of the example (nothing listens there)."""
    default = Ports()
    ports = {
        default.api: stack.ports.api,
        default.sandbox: stack.ports.sandbox,
        18000: stack.ports.api,
        18100: stack.ports.sandbox,
    }

    def swap(found: re.Match[str]) -> str:
        port = int(found.group(2))
        assert port in ports, f"{found.group(0)}: not a port of the dev stack"
        return f"{found.group(1)}:{ports[port]}"

    return LOOPBACK.sub(swap, text)


@pytest.fixture(scope="module")
def dev_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack as `make dev` starts it (the sandbox kinds), for this module alone: the references the
    examples show (b-1, r-1) are the first of their service's."""
    with Stack.on_free_ports(tmp_path_factory.mktemp("dev"), None, ui=False).running() as running:
        yield running


def shell_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@dataclass(frozen=True)
class Command:
    text: str
    shown: str  # the answer shown after it, in `#   ` comment lines (three spaces)

    @property
    def reads(self) -> bool:
        """A read may be asked again until its answer is the one shown ("a moment later"); a write
        is sent once."""
        return not re.search(r"-X\s*(POST|PUT|PATCH|DELETE)|\s-d\s", self.text)


def commands(code: str) -> list[Command]:
    """A shell example's commands, each with the answer shown right under it."""
    found: list[Command] = []
    pending: list[str] = []
    answering = False  # whether a `#   ` line now belongs to the last command
    for line in code.splitlines():
        if line.startswith("#   ") and answering:
            found[-1] = Command(found[-1].text, f"{found[-1].shown} {line[4:].strip()}".strip())
        elif not line.strip() or line.startswith("#"):
            answering = False
        else:
            pending.append(line)
            joined = "\n".join(pending)
            if not joined.endswith("\\") and complete(joined):
                found.append(Command(joined, ""))
                pending, answering = [], True
    assert not pending, f"an unfinished command: {pending}"
    return found


def complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # a quote still open: the command goes on over the next line
        return False
    return True


def pairs_shown(shown: str) -> list[tuple[str, str, bool]]:
    """The `"key":"value"` pairs of a shown answer, each with whether it is at the answer's top level."""
    found = []
    depth = 0
    index = 0
    pair = re.compile(r'"(\w+)"\s*:\s*"((?:[^"\\]|\\.)*)"')
    while index < len(shown):
        if match := pair.match(shown, index):
            found.append((match.group(1), match.group(2), depth == 0))
            index = match.end()
        elif shown[index] == '"':
            index = shown.index('"', index + 1) + 1
        else:
            depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(shown[index], 0)
            index += 1
    return found


def like(pattern: str, text: str) -> bool:
    """Whether `text` is what the docs show, `…` standing for anything."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("…"))), text, re.DOTALL) is not None


def objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from objects(item)


def mismatches(answer: Any, shown: str) -> list[str]:
    wrong = []
    for key, value, top in pairs_shown(shown):
        where = [answer] if top and isinstance(answer, dict) else list(objects(answer))
        if not any(isinstance(obj.get(key), str) and like(value, obj[key]) for obj in where):
            wrong.append(f'"{key}":"{value}"')
    return wrong


def run_shell(command: Command, stack: Stack) -> subprocess.CompletedProcess[str]:
    # curl as written, except that an HTTP error fails the command instead of passing for an answer.
    script = 'curl() { command curl --fail-with-body "$@"; }\n' + on_ports(command.text, stack)
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        cwd=ROOT,
        env=shell_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_shell_example(start: tuple[str, str], stack: Stack) -> None:
    for command in commands(example(*start).code):
        if not command.shown:
            result = run_shell(command, stack)
            assert result.returncode == 0, (command.text, result.stdout, result.stderr)
            continue

        def answered(command: Command = command) -> tuple[Any, list[str]]:
            result = run_shell(command, stack)
            assert result.returncode == 0, (command.text, result.stdout, result.stderr)
            answer = json.loads(result.stdout)
            return answer, mismatches(answer, command.shown)

        if command.reads:
            answer, wrong = wait_for(
                lambda answered=answered: (found := answered()) and not found[1] and found,
                60,
                f"{command.text!r} to answer as shown",
            )
        else:
            answer, wrong = answered()
        assert wrong == [], (command.text, wrong, answer)


def test_the_check_reads_commands_and_their_shown_answers() -> None:
    code = (
        "# 1. prose\ncurl -s -XPOST localhost:8000/x \\\n  -d '{\"a\":1}'\n"
        '#   "state":"requested", "say":"Nothing (…) yet."\n'
        '#   "history": […, {"state":"unknown"}]\n\n# 2. more\ncurl -s localhost:8000/y -d \'{\n  "b": 2}\'\n'
    )
    assert commands(code) == [
        Command(
            "curl -s -XPOST localhost:8000/x \\\n  -d '{\"a\":1}'",
            '"state":"requested", "say":"Nothing (…) yet." "history": […, {"state":"unknown"}]',
        ),
        Command("curl -s localhost:8000/y -d '{\n  \"b\": 2}'", ""),
    ]
    shown = commands(code)[0].shown
    answer = {"state": "requested", "say": "Nothing (at all) yet.", "history": [{"state": "unknown"}]}
    assert mismatches(answer, shown) == []
    assert mismatches({**answer, "state": "unknown"}, shown) == ['"state":"requested"']
    assert mismatches({**answer, "history": []}, shown) == ['"state":"unknown"']


def run_python(code: str, stack: Stack, tmp_path: Path) -> str:
    program = tmp_path / "example.py"
    program.write_text(on_ports(code, stack))
    result = subprocess.run(
        [sys.executable, str(program)], cwd=ROOT, env=shell_env(), capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


# The tests below share the module's stack and run in this order: the tour first, so that its booking
# is the service's first (b-1), then the MCP refund (r-1), then the rest.


def test_the_readme_curl_tour_runs_as_written_and_answers_as_shown(dev_stack: Stack) -> None:
    run_shell_example(README_TOUR, dev_stack)
    run_shell_example(README_LOST_RESPONSE, dev_stack)


def test_the_mcp_client_example_prints_what_the_page_shows(dev_stack: Stack, tmp_path: Path) -> None:
    printed = run_python(example(*MCP_CLIENT).code, dev_stack, tmp_path).splitlines()
    page = (ROOT / MCP_CLIENT[0]).read_text()
    shown = page[page.index("then confirmed:\n\n```\n") :].split("```")[1].strip().splitlines()
    assert len(printed) == len(shown), printed
    for line, expected in zip(printed, shown, strict=True):
        assert like(expected, line), (expected, line)


def test_the_vapi_curl_answers_as_shown(dev_stack: Stack) -> None:
    run_shell_example(VAPI_CURL, dev_stack)


def test_check_kinds_runs_as_written(dev_stack: Stack) -> None:
    run_shell_example(CHECK_KINDS, dev_stack)


def test_the_profiling_load_runs(dev_stack: Stack, tmp_path: Path) -> None:
    code = example(*PROFILE_LOAD).code
    # Its 60 s at 16 callers cut to a few seconds at 2: the program is the same.
    assert "asyncio.run(main())" in code
    run_python(
        code.replace("asyncio.run(main())", "asyncio.run(main(seconds=3, callers=2))"), dev_stack, tmp_path
    )
