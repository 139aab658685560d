"""What a user installs: the sdist and the wheel that the standard builder makes (`python -m build`,
the wheel built from the sdist), each installed into a clean virtual environment beside the newest
release of an adapted framework that pip finds; that adapter's tests run there against a real stack
that the installed package itself starts (its server extra), with the repository's tests copied
elsewhere, so that only what was installed can be imported."""

import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.version import Version

from tests.installs.venvs import ROOT, UV, installed, normalized, pytest_in, run

GOOGLE_ADK = "tests/adapters/test_google_adk.py"
VOICE_FRAMEWORKS_MCP = "tests/mcp/test_voice_frameworks.py"
# extra → (the framework's distribution, the adapter's tests, the artifact it is installed from).
CASES = {
    "openai-agents": ("openai-agents", ["tests/adapters/test_openai_agents.py"], "wheel"),
    "pipecat": ("pipecat-ai", ["tests/adapters/test_pipecat.py"], "sdist"),
    "livekit": (
        "livekit-agents",
        ["tests/adapters/test_livekit.py", f"{VOICE_FRAMEWORKS_MCP}::test_livekit_agents_lists_the_tools"],
        "wheel",
    ),
    # The barge-in of this one test lands after the filler has ended when the machine is very busy,
    # in any environment; tests/adapters runs it.
    "google-adk": (
        "google-adk",
        [
            GOOGLE_ADK,
            "--deselect",
            f"{GOOGLE_ADK}::test_a_stop_while_the_refund_is_in_flight_is_answered_truly",
        ],
        "sdist",
    ),
}
TEST_TOOLS = ["pytest", "pytest-asyncio", "pytest-timeout"]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    into = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(into), str(ROOT)], timeout=600)
    [sdist] = into.glob("settled-*.tar.gz")
    [wheel] = into.glob("settled-*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def copied_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests and the examples they drive, apart from the repository's packages."""
    where = tmp_path_factory.mktemp("elsewhere")
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "tests", where / "tests", ignore=skip)
    shutil.copytree(ROOT / "examples", where / "examples", ignore=skip)
    # The guides whose examples a test runs as written (docs/gemini-live.md), without their pictures.
    shutil.copytree(ROOT / "docs", where / "docs", ignore=shutil.ignore_patterns("*.png", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")  # pytest's settings
    return where


def newest(distribution: str) -> Version:
    """The newest release pip finds."""
    listed = run([sys.executable, "-m", "pip", "index", "versions", distribution], timeout=120)
    return Version(listed.splitlines()[0].split("(")[1].rstrip(")"))


def test_the_sdist_carries_what_the_wheel_is_built_from(artifacts: dict[str, Path]) -> None:
    with tarfile.open(artifacts["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md"} <= names, names
    for folder in ("settled", "api", "adapters", "workflows", "workers", "cli", "gateway"):
        assert any(name.startswith(f"{folder}/") and name.endswith(".py") for name in names), folder


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("extra", list(CASES))
def test_an_adapter_from_the_built_package_passes_its_tests_beside_its_framework_s_newest_release(
    extra: str, artifacts: dict[str, Path], copied_tests: Path, tmp_path: Path
) -> None:
    distribution, tests, artifact = CASES[extra]
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], timeout=120)
    wanted = f"settled[server,{extra}] @ {artifacts[artifact].as_uri()}"
    run([UV, "pip", "install", "--quiet", "--python", str(python), wanted, *TEST_TOOLS], timeout=900)

    has = installed(python)
    assert has[normalized(distribution)] == newest(distribution), (
        distribution,
        has[normalized(distribution)],
    )
    where = run([str(python), "-c", "import settled.api, settled.adapters; print(settled.api.__file__)"],
                cwd=copied_tests, timeout=60)  # fmt: skip
    assert str(venv) in where, where  # the installed package, not a checkout
    summary = pytest_in(python, tests, cwd=copied_tests, timeout=2000)
    print(f"{artifact} beside {distribution} {has[normalized(distribution)]}: {summary}")
