"""The import layers of docs/architecture.md are enforced: the package as it installs keeps every
contract, and a crossing (the state machine importing the HTTP edge) breaks the build."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("layers")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def lint(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml")],
        cwd=folder,
        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_installed_package_keeps_every_layer_contract(built: Path) -> None:
    result = lint(built)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "7 kept, 0 broken" in result.stdout


def test_a_crossing_breaks_the_build(built: Path, tmp_path: Path) -> None:
    crossed = tmp_path / "crossed"
    shutil.copytree(built / "settled", crossed / "settled")
    machine = crossed / "settled" / "domain" / "machine.py"
    machine.write_text(machine.read_text() + "\nimport settled.api.app  # a crossing\n")
    result = lint(crossed)
    assert result.returncode != 0
    assert "settled.domain is not allowed to import settled.api" in result.stdout
    assert "settled.domain is not allowed to import httpx" in result.stdout
