"""What `settled doctor` and `settled list` say on a namespace that is not ready, against a real dev
server: each fix once; for a search attribute registered with the wrong type, a fix that truly works
(Temporal cannot change a type in place), proven by running it as printed; `settled list` naming the
fix; and `doctor --json` answering JSON when the configuration itself is wrong."""

import json
import shlex
import subprocess
import uuid
from pathlib import Path

from settled.runtime.stack import temporal_binary
from settled.temporal import visibility
from tests.reach.test_preflight import _env, bare, settled

__all__ = ["bare"]  # the module's own bare dev server


def _temporal(address: str, command: str) -> None:
    argv = shlex.split(command)
    assert argv[0] == "temporal", command
    ran = subprocess.run(
        [str(temporal_binary()), *argv[1:], "--address", address], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, f"{command}: {ran.stderr}"


def test_a_wrong_typed_attribute_is_named_with_a_fix_that_works_and_each_fix_is_said_once(
    bare: str, tmp_path: Path
) -> None:
    namespace = f"mistyped-{uuid.uuid4().hex[:8]}"
    _temporal(bare, f"temporal operator namespace create --namespace {namespace} --retention 1d")
    _temporal(
        bare,
        f"temporal operator search-attribute create --namespace {namespace} --name SettledState --type Int",
    )
    env = _env(bare, tmp_path, SETTLED_NAMESPACE=namespace)

    listed = settled(env, "list")
    said = listed.stderr.strip()
    assert listed.returncode == 1, said
    assert len(said.splitlines()) == 1 and "Traceback" not in said, said
    assert said.startswith("settled: temporal_error: ")
    assert "SettledState is registered as Int, settled needs Keyword" in said
    assert f"fix (self-hosted): temporal operator search-attribute remove --namespace {namespace}" in said
    assert "settled doctor" in said

    text = settled(env, "doctor")
    assert text.returncode == 1
    assert "Temporal cannot change a search attribute's type in place" in text.stdout
    # Five failed attributes, one command each way to fix them all.
    assert text.stdout.count("temporal operator search-attribute create") == 1, text.stdout
    assert text.stdout.count("tcld namespace search-attributes add") == 1, text.stdout
    assert text.stdout.count("tcld namespace search-attributes rename") == 1, text.stdout

    report = json.loads(settled(env, "doctor", "--json").stdout)
    assert report["ok"] is False
    (self_hosted,) = [
        fix
        for fix in report["fixes"]
        if fix["where"] == "self-hosted" and "search-attribute" in fix["command"]
    ]
    assert sorted(self_hosted["checks"]) == sorted(
        f"search attribute {name} ({kind})" for name, kind in visibility.declared().items()
    )
    # The fix, run exactly as printed (each command, with this server's address), makes them pass.
    for command in self_hosted["command"].split(" && "):
        _temporal(bare, command)
    after = json.loads(settled(env, "doctor", "--json").stdout)
    failed = [check["name"] for check in after["checks"] if check["verdict"] == "failed"]
    assert (
        failed == []
        and after["ok"] is True
        and after["fixes"]
        == [
            fix
            for fix in after["fixes"]
            if fix["where"] == "self-hosted" and "dynamic config" in fix["command"]
        ]
    )
    assert settled(env, "list", "--json").returncode == 0


def test_doctor_json_answers_json_when_the_configuration_is_wrong(bare: str, tmp_path: Path) -> None:
    env = _env(bare, tmp_path, SETTLED_CONFIG=str(tmp_path / "no-such-kinds.toml"))
    result = settled(env, "doctor", "--json")
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["temporal"] is None and report["fixes"] == []
    (check,) = report["checks"]
    assert check["name"] == "configuration" and check["verdict"] == "failed"
    assert "no-such-kinds.toml" in check["detail"]
    assert result.stderr.startswith("settled: ") and "Traceback" not in result.stderr
