"""The docs hold together: every relative link and every repository path that the README and docs/ name
exists, every #anchor names a heading of its page (GitHub's slug rule), and the README stays a front
page."""

import fnmatch
import itertools
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path, PurePosixPath

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKDOWN = MarkdownIt("commonmark").enable("table")

# A repository path as the docs write one, in code (`settled/domain/machine.py`, `tests/golden/golden-*`)
# or in prose (docs/deployment.md): segments joined by slashes, the first a top-level entry of the tree.
CODE_PATH = re.compile(r"[\w.-]+(?:/[\w.*-]+)+/?")
PROSE_PATH = re.compile(r"(?<![\w./:-])[\w-]+(?:/[\w.-]*\w)+/?")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@cache
def tracked() -> frozenset[str]:
    """The files a commit of this tree holds (committed, or new and not ignored): a file that exists only
    here, such as a run's output, is nothing the docs may point at."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    return frozenset(name for name in listed.stdout.decode().split("\0") if (ROOT / name).exists())


@cache
def folders() -> frozenset[str]:
    return frozenset(str(parent) for name in tracked() for parent in PurePosixPath(name).parents)


@cache
def top_level() -> frozenset[str]:
    return frozenset(name.split("/")[0] for name in tracked())


def exists(path: str) -> bool:
    path = path.rstrip("/")
    if "*" in path:
        return any(fnmatch.fnmatchcase(name, path) for name in tracked() | folders())
    return path in tracked() or path in folders()


def github_slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def plain(inline: Token) -> str:
    return "".join(child.content for child in inline.children or [] if child.type in {"text", "code_inline"})


def tokens(source: str) -> Iterator[Token]:
    for token in MARKDOWN.parse(source):
        yield token
        yield from token.children or []


@cache
def anchors(source: str) -> frozenset[str]:
    """The anchors GitHub gives a page's headings (a repeated heading's get -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    parsed = MARKDOWN.parse(source)
    for opening, inline in itertools.pairwise(parsed):
        if opening.type == "heading_open":
            slug = github_slug(plain(inline))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def relative(page: Path, target: str) -> str:
    """A link's target as a path from the top of the tree ('..' resolved), or '' outside it."""
    joined = PurePosixPath(page.parent.relative_to(ROOT).as_posix()) / target
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if not parts:
                return ""
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def broken_links(page: Path, source: str) -> list[str]:
    problems = []
    for token in tokens(source):
        target = token.attrs.get("href") if token.type == "link_open" else token.attrs.get("src")
        if not isinstance(target, str) or SCHEME.match(target) or target.startswith("//"):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors(source):
                problems.append(f"#{anchor}: no such heading in {page.name}")
            continue
        resolved = relative(page, path)
        if not resolved or not exists(resolved):
            problems.append(f"{target}: no such file")
        elif anchor and resolved.endswith(".md") and anchor not in anchors((ROOT / resolved).read_text()):
            problems.append(f"{target}: no such heading in {resolved}")
    return problems


def missing_paths(source: str) -> list[str]:
    named: set[str] = set()
    for token in tokens(source):
        if token.type == "code_inline" and CODE_PATH.fullmatch(token.content):
            named.add(token.content)
        elif token.type == "text":
            named.update(PROSE_PATH.findall(token.content))
    return sorted(path for path in named if path.split("/")[0] in top_level() and not exists(path))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page, page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_named_path_exists(page: Path) -> None:
    assert missing_paths(page.read_text()) == []


def test_the_checks_catch_what_breaks() -> None:
    page = ROOT / "docs" / "reference.md"
    source = (
        "# A page\n\n[gone](nowhere.md) · [no heading](#no-such-heading) · [elsewhere](deployment.md#nope)"
        " · [fine](../README.md) · [here](#a-page) · ![pic](screenshots/none.png)\n\n"
        "See `settled/no_such_module.py` and docs/no-such-guide.md; `bench-results/results.json` is made"
        " by a run, and `DIR/logs` is a placeholder.\n"
    )
    assert broken_links(page, source) == [
        "nowhere.md: no such file",
        "#no-such-heading: no such heading in reference.md",
        "deployment.md#nope: no such heading in docs/deployment.md",
        "screenshots/none.png: no such file",
    ]
    assert missing_paths(source) == ["docs/no-such-guide.md", "settled/no_such_module.py"]
    assert anchors("## `settled drill`\n\n## Tools\n\n## Tools\n") == {"settled-drill", "tools", "tools-1"}


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("1. States", "1-states"),
        ("One kind's trouble stays its own: bulkheads", "one-kinds-trouble-stays-its-own-bulkheads"),
        ("POST /v1/actions — request an action", "post-v1actions--request-an-action"),
        ("What make test runs", "what-make-test-runs"),
    ],
)
def test_github_slugs(heading: str, anchor: str) -> None:
    assert github_slug(heading) == anchor


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    # The marks of code blocks that are fragments (test_examples.py) are not shown: not counted.
    assert len([line for line in readme.splitlines() if not line.startswith("<!-- fragment")]) <= 250
    # The two set-up commands, as CI and a newcomer read them.
    assert re.search(r"^make dev +#.*\nmake test +#", readme, re.MULTILINE)
