"""The exact set the tests run on is uv.lock; pyproject.toml declares ranges. The lock must satisfy
them: `make install` refuses a stale lock (`uv sync --locked`), and so does this test, without the
network."""

import re
import shutil
import subprocess
from pathlib import Path

from tests.installs.venvs import ROOT, UV


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
