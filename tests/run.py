"""`make test`'s pytest: the test folders in a few groups run side by side, each its own pytest process
with its own session stack, so that waiting (on servers, on conditions) overlaps. A folder not named in
GROUPS joins the default group, so a new folder is run without a change here. Each group's output is
printed whole when it ends; then each group's closing line, and one line for them all. The exit status
is 1 when any group failed (a group that collected no tests, pytest's exit 5, has not).

    python -m tests.run [pytest options...]
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DEFAULT = "rest"
# Groups of about equal length on a 2-core machine: the end-to-end tests on the session's stack, those
# that start stacks of their own (a file named here leaves its folder's group), the real servers', the
# tools' runs and the browser's, then everything else.
GROUPS: dict[str, tuple[str, ...]] = {
    "e2e": ("e2e",),
    "e2e-stacks": tuple(
        f"e2e/test_{name}.py"
        for name in (
            "api_crash",
            "backlog",
            "billed_actions",
            "bulkheads",
            "conversation_tokens",
            "crashes",
            "eager_start",
            "outages",
            "reopening",
            "restarts",
            "security",
            "send_in_flight",
            "services",
            "traces",
            "waits",
        )
    ),
    "servers": ("adapters", "platforms", "reach", "services"),
    "tools": ("bench", "deploy", "drill", "light", "mcp", "page", "soak", "typescript"),
    # What users install: the lock, the lowest versions, the built artifacts (mostly pip and npm).
    "installs": ("installs",),
    DEFAULT: (),
}
NO_TESTS = 5  # pytest's exit status when a group collected nothing
COUNTED = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


def folders_with_tests(tests: Path = TESTS) -> list[str]:
    """Every folder of tests/ that holds tests, and each test file of tests/ itself."""
    return sorted(
        path.name
        for path in tests.iterdir()
        if (path.is_dir() and any(path.rglob("test_*.py"))) or path.match("test_*.py")
    )


def grouped(folders: list[str], tests: Path = TESTS) -> dict[str, list[str]]:
    """Each group's folders (and files of a folder), relative to tests/: a folder not named joins the
    default group; a file named in a group that no longer exists is left out."""
    named = {folder: group for group, members in GROUPS.items() for folder in members if "/" not in folder}
    groups: dict[str, list[str]] = {group: [] for group in GROUPS}
    for folder in folders:
        groups[named.get(folder, DEFAULT)].append(folder)
    for group, members in GROUPS.items():
        groups[group] += [file for file in members if "/" in file and (tests / file).is_file()]
    return {group: members for group, members in groups.items() if members}


def taken_out(members: list[str], groups: dict[str, list[str]]) -> list[str]:
    """The files of these folders that other groups run."""
    return sorted(
        file
        for others in groups.values()
        if others is not members
        for file in others
        if file.split("/")[0] in members
    )


@dataclass
class Run:
    group: str
    folders: list[str]
    log: Path
    tests: Path = TESTS
    ignore: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    started: float = field(default_factory=time.monotonic)
    took_s: float = 0.0

    def start(self, options: list[str]) -> None:
        paths = [str(self.tests / folder) for folder in self.folders]
        cache = self.tests.parent / ".pytest_cache" / self.group  # one each: no two writers of a file
        ignored = [f"--ignore={self.tests / file}" for file in self.ignore]
        argv = [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={cache}", *ignored, *options, *paths]
        with self.log.open("wb") as out:
            # A session of its own, so that an interrupt can stop the group and every server it started.
            self.process = subprocess.Popen(
                argv, cwd=self.tests.parent, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def code(self) -> int | None:
        assert self.process is not None
        return self.process.poll()

    @property
    def failed(self) -> bool:
        return self.code not in (0, NO_TESTS)

    def closing_line(self) -> str:
        """pytest's last line (`N passed, ... in T s`), or what ended the group without one."""
        lines = [
            line.strip("= \n") for line in self.log.read_text(errors="replace").splitlines() if line.strip()
        ]
        closing = next((line for line in reversed(lines) if re.search(r"\bin [\d.]+s\b", line)), "")
        return closing or f"no summary (exit status {self.code})"

    def counts(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for number, what in COUNTED.findall(self.closing_line()):
            found[what.rstrip("s") if what.startswith(("error", "warning")) else what] += int(number)
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)


def report(run: Run, out: IO[str]) -> None:
    status = "passed" if not run.failed else f"FAILED (exit status {run.code})"
    out.write(f"\n===== group {run.group} ({', '.join(run.folders)}): {status} in {run.took_s:.0f} s =====\n")
    out.write(run.log.read_text(errors="replace"))
    out.flush()


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def main(options: list[str]) -> int:
    logs = Path(tempfile.mkdtemp(prefix="settled-tests-"))
    groups = grouped(folders_with_tests())
    runs = [
        Run(group, members, logs / f"{group}.log", ignore=taken_out(members, groups))
        for group, members in groups.items()
    ]
    started = time.monotonic()
    print(f"{len(runs)} groups side by side (their output in {logs}):", flush=True)
    for run in runs:
        print(f"  {run.group}: {' '.join(run.folders)}", flush=True)
        run.start(options)
    pending = list(runs)
    try:
        while pending:
            for run in [run for run in pending if run.code is not None]:
                run.took_s = time.monotonic() - run.started
                pending.remove(run)
                report(run, sys.stdout)
            time.sleep(0.5)
    except KeyboardInterrupt:
        for run in pending:
            run.stop()
        for run in pending:
            assert run.process is not None
            run.process.wait()
        raise
    total: Counter[str] = Counter()
    print("\n===== every group =====")
    for run in runs:
        total.update(run.counts())
        print(f"{run.group}: {run.closing_line()}{'' if not run.failed else f'  (exit status {run.code})'}")
    failed_groups = [run.group for run in runs if run.failed]
    extra = ", ".join(
        f"{total[what]} {what}" for what in ("error", "skipped", "xfailed", "xpassed") if total[what]
    )
    print(
        f"{total['passed']} passed, {total['failed']} failed{', ' + extra if extra else ''}"
        f" in {minutes(time.monotonic() - started)}"
        + (f"; groups failed: {', '.join(failed_groups)}" if failed_groups else "")
    )
    return 1 if failed_groups else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
