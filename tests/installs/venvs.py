"""What the install tests share: the ranges pyproject.toml declares, uv (from the test extra) to build
virtual environments quickly, and a pytest run inside another environment, judged by its summary."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).parent / "uv")
# What an agent app or a server installs; `test` is how this repository tests it.
RUNTIME_EXTRAS = ("server", "tools", "openai-agents", "pipecat", "livekit", "google-adk")
ALL_EXTRAS = (*RUNTIME_EXTRAS, "test")


def declared(extras: tuple[str, ...] = RUNTIME_EXTRAS) -> list[Requirement]:
    """The light install's requirements and those of `extras`, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    texts = [*project["dependencies"], *(t for e in extras for t in project["optional-dependencies"][e])]
    return [r for r in map(Requirement, texts) if r.name != "settled"]


def lower_bound(requirement: Requirement) -> Version:
    [bound] = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return bound


def run(command: list[str], timeout: float, cwd: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def installed(python: Path) -> dict[str, Version]:
    """What an environment holds, by normalized name."""
    listed = run([UV, "pip", "freeze", "--python", str(python)], timeout=60)
    pins = (line.split("==") for line in listed.splitlines() if "==" in line)
    return {normalized(name): Version(version) for name, version in pins}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pytest_in(python: Path, tests: list[str], cwd: Path, timeout: float) -> str:
    """Run `tests` with another environment's pytest; every one must pass, none may be skipped (a
    framework missing there would skip its tests)."""
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "--durations=8", *tests]
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        seen = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else ""
        raise AssertionError(f"not done in {timeout:.0f} s; so far:\n{seen[-6000:]}") from None
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    verdicts = "\n".join(line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR")))
    assert done.returncode == 0, f"{verdicts}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert " passed" in summary and "skipped" not in summary, summary
    return summary
