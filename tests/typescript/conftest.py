"""Fixtures for the TypeScript package's tests: the package installed and built by the Makefile."""

import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "typescript"


def npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """npm in the package's folder; the suite is kept under two minutes."""
    return subprocess.run(["npm", *args], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=170)


@pytest.fixture(scope="session")
def built() -> Path:
    """`make typescript`: npm ci and the build, each skipped while up to date."""
    if shutil.which("npm") is None:
        pytest.fail("npm is not installed: `make install` installs Node.js and the package's modules")
    make = ["make", "--no-print-directory", "typescript"]
    build = subprocess.run(make, cwd=PACKAGE.parent, capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    return PACKAGE
