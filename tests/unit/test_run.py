"""`make test`'s runner (tests/run.py): every test folder is in a group, a new one in the default group;
a group's failure fails the run, a group without tests does not; the closing lines are read right."""

import time
from pathlib import Path

from tests.run import DEFAULT, GROUPS, Run, folders_with_tests, grouped, taken_out


def test_every_folder_is_run_once_and_a_new_one_in_the_default_group(tmp_path: Path) -> None:
    folders = folders_with_tests()
    assert "e2e" in folders and "unit" in folders and "golden" not in folders  # golden: data only
    groups = grouped([*folders, "oncall"])
    named = sorted(entry for members in groups.values() for entry in members if "/" not in entry)
    assert named == sorted([*folders, "oncall"])
    assert "oncall" in groups[DEFAULT]
    # A file named in another group is run there, and only there.
    moved = [file for file in groups["e2e-stacks"] if file.startswith("e2e/")]
    assert "e2e/test_crashes.py" in moved
    assert taken_out(groups["e2e"], groups) == sorted(moved)
    for folder in ("new", "empty"):
        (tmp_path / folder).mkdir()
    (tmp_path / "new" / "deep").mkdir()
    (tmp_path / "new" / "deep" / "test_a.py").write_text("")
    (tmp_path / "test_top.py").write_text("")
    assert folders_with_tests(tmp_path) == ["new", "test_top.py"]
    assert set(GROUPS) >= {DEFAULT}


def started(tmp_path: Path, group: str, test: str | None) -> Run:
    tests = tmp_path / group / "tests"
    (tests / "it").mkdir(parents=True)
    if test is not None:
        (tests / "it" / "test_it.py").write_text(test)
    run = Run(group, ["it"], tmp_path / f"{group}.log", tests=tests)
    run.start([])
    return run


def test_a_failing_group_fails_and_one_without_tests_does_not(tmp_path: Path) -> None:
    passing = started(tmp_path, "passing", "def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    failing = started(tmp_path, "failing", "def test_one():\n    pass\n\ndef test_two():\n    assert False\n")
    empty = started(tmp_path, "empty", None)
    deadline = time.monotonic() + 120
    while any(run.code is None for run in (passing, failing, empty)):
        assert time.monotonic() < deadline, "the groups did not finish"
        time.sleep(0.1)
    assert not passing.failed and passing.counts() == {"passed": 2}
    assert failing.failed and failing.counts() == {"passed": 1, "failed": 1}
    assert "1 failed, 1 passed in" in failing.closing_line()
    assert empty.code == 5 and not empty.failed
