"""The exact set the tests run on is uv.lock; pyproject.toml declares ranges. The lock must satisfy
them: `make install` refuses a stale lock (`uv sync --locked`), and so does this test, without the
network."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.installs.venvs import ROOT, UV, run


def check(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [UV, "lock", "--check", "--offline", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_lock_satisfies_the_declared_ranges() -> None:
    done = check(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_range_the_lock_no_longer_satisfies_is_refused(tmp_path: Path) -> None:
    shutil.copy(ROOT / "uv.lock", tmp_path / "uv.lock")
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # The ranges move on without the lock: one requirement fewer (resolvable offline, from what the
    # lock itself records), and the lock still names it.
    assert '"jmespath>=' in project
    (tmp_path / "pyproject.toml").write_text(re.sub(r'\n *"jmespath>=[^"]*",', "", project), encoding="utf-8")
    done = check(tmp_path)
    assert done.returncode != 0
    assert "needs to be updated" in done.stdout + done.stderr, done.stdout + done.stderr


SERVER_PINS = ROOT / "deploy" / "requirements-server.txt"


def test_the_image_s_pins_are_the_lock_s_server_extra() -> None:
    """The Dockerfile installs deploy/requirements-server.txt: it must be what `make lock` exports
    from the lock now, not from an older one."""
    exported = subprocess.run(
        [
            UV,
            "export",
            "--frozen",
            "--no-dev",
            "--extra",
            "server",
            "--no-emit-project",
            "--project",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    pins = [line for line in SERVER_PINS.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    assert pins == [line for line in exported.splitlines() if not line.startswith("#")]
    assert "--hash=sha256:" in exported


def test_the_image_s_install_steps_give_a_working_server(tmp_path: Path) -> None:
    """What the Dockerfile runs, in a fresh environment: the pins with their hashes, then the project
    without its dependencies; nothing is missing or in conflict, and the server's commands load."""
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], timeout=120)
    run([UV, "pip", "install", "--quiet", "--python", str(python), "--require-hashes", "--no-deps",
         "-r", str(SERVER_PINS)], timeout=900)  # fmt: skip
    run(
        [UV, "pip", "install", "--quiet", "--python", str(python), "--no-deps", f"{ROOT}[server]"],
        timeout=600,
    )
    run([UV, "pip", "check", "--python", str(python)], timeout=120)
    assert "settled" in run([str(venv / "bin" / "settled"), "--version"], timeout=60)
    run(
        [str(python), "-c", "import settled.api.app, settled.workers.main, uvicorn"], cwd=tmp_path, timeout=60
    )
