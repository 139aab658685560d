"""The TypeScript package is held to Python's id rule and tool text by vectors Python generates: the
checked-in file must be what Python generates now (`python -m tests.typescript.vectors` rewrites it)."""

from tests.typescript.vectors import PATH, generate


def test_the_checked_in_vectors_are_what_python_generates_now() -> None:
    assert PATH.read_text(encoding="utf-8") == generate(), (
        "typescript/test/vectors.json is stale: run `.venv/bin/python -m tests.typescript.vectors`"
    )
