"""The lowest versions the declared ranges allow, every extra together in one resolution (uv's
`--resolution lowest-direct`): each lower bound in pyproject.toml is what gets installed, and a few
unit tests and one real-stack test per extra pass on it. The environment is built once and kept
beside the running one (`<venv>/lowest`), rebuilt when pyproject.toml changes."""

import fcntl
import hashlib
import sys
from pathlib import Path

import pytest

from tests.installs.venvs import (
    ALL_EXTRAS,
    ROOT,
    UV,
    declared,
    installed,
    lower_bound,
    normalized,
    pytest_in,
    run,
)

LOWEST = Path(sys.prefix) / "lowest"
PYTHON = LOWEST / "bin" / "python"

# The unit tests of what the lower bounds touch most: the pure state machine (pydantic), the payload
# codec (cryptography), the golden histories replayed (temporalio).
UNIT = [
    "tests/unit/test_machine.py",
    "tests/unit/test_codec.py",
    "tests/unit/test_replay.py",
]
# One real-stack test per extra: the stack itself runs the server extra from this environment.
REAL_STACK = [
    "tests/adapters/test_openai_agents.py::test_with_settled_the_claim_is_true_and_there_is_one_refund",
    "tests/adapters/test_pipecat.py::test_with_settled_the_interruption_cancels_nothing_and_there_is_one_refund",
    "tests/adapters/test_livekit.py::test_with_settled_the_claim_is_true_and_there_is_one_refund",
    "tests/adapters/test_google_adk.py::test_a_confirmation_heard_to_its_end_is_not_repeated",
    "tests/e2e/test_traces.py::test_an_interrupted_refund_is_one_connected_trace",
    "tests/mcp/test_agents_sdk.py",
]


def stamp() -> str:
    uv = run([UV, "--version"], timeout=30)
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + uv.encode()).hexdigest()


@pytest.fixture(scope="module")
def lowest() -> Path:
    """The environment, built unless its stamp says it is current (a lock file keeps two sessions
    from building it at once)."""
    LOWEST.parent.mkdir(parents=True, exist_ok=True)
    with open(LOWEST.parent / "lowest.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        wanted = stamp()
        marker = LOWEST / ".stamp"
        if marker.exists() and marker.read_text() == wanted:
            return PYTHON
        pins = LOWEST.parent / "lowest.txt"
        extras = [argument for extra in ALL_EXTRAS for argument in ("--extra", extra)]
        run([UV, "venv", "--quiet", "--clear", "--python", sys.executable, str(LOWEST)], timeout=120)
        run(
            [UV, "pip", "compile", "--quiet", str(ROOT / "pyproject.toml"), *extras, "--resolution",
             "lowest-direct", "--python", str(PYTHON), "-o", str(pins)],
            timeout=600,
        )  # fmt: skip
        run([UV, "pip", "sync", "--quiet", "--python", str(PYTHON), str(pins)], timeout=900)
        run(
            [UV, "pip", "install", "--quiet", "--python", str(PYTHON), "--no-deps", "-e", str(ROOT)],
            timeout=300,
        )
        marker.write_text(wanted)
    return PYTHON


def test_each_declared_lower_bound_is_what_the_lowest_resolution_installs(lowest: Path) -> None:
    has = installed(lowest)
    differ = {
        str(requirement): str(has.get(normalized(requirement.name)))
        for requirement in declared(ALL_EXTRAS)
        if has.get(normalized(requirement.name)) != lower_bound(requirement)
    }
    assert not differ, differ


@pytest.mark.timeout(1800)
def test_unit_tests_and_a_real_stack_test_per_extra_pass_on_the_lowest_versions(lowest: Path) -> None:
    summary = pytest_in(lowest, [*UNIT, *REAL_STACK], cwd=ROOT, timeout=1700)
    print(summary)
