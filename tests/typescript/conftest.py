"""Fixtures for the TypeScript package's tests: the package installed and built by the Makefile."""

import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "typescript"


def npm(*args: str, env: dict[str, str] | None = None, timeout_s: float = 170) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", *args], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.fixture(scope="session")
def built() -> Path:
    """`make typescript`: npm ci and the build, each skipped while up to date."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not installed: `make install` installs Node.js and the package's modules")
    build = subprocess.run(
        ["make", "--no-print-directory", "typescript"], cwd=PACKAGE.parent, capture_output=True, text=True, check=False
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return PACKAGE
