"""Every `tcld` command settled prints (the fixes of its checks) or documents (README.md, docs/) is held
to tcld's own flags: only flags tcld has, every flag it requires, and for `namespace create` the CA
certificate its auth method needs (tcld's default, mTLS, refuses to create a namespace without one).

tcld is not installable here; the table below is read from its source, temporalio/tcld at commit
f89fc4a (2026-07-31): app/namespace.go (`getCreateNamespaceFlags`, the `search-attributes` and
`update-codec-server` commands, `ReadCACertsRequired`, `AuthMethods`), app/flags.go and app/app.go
(the global flags), protogen/api/namespace/v1 (`SearchAttributeType_value`).
"""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from settled.gateway.preflight import attribute_fixes, namespace_fixes

from settled.temporal import visibility

ROOT = Path(__file__).parents[2]


@dataclass(frozen=True)
class Command:
    flags: frozenset[str]  # every flag that takes a value
    required: frozenset[str] = frozenset()
    switches: frozenset[str] = field(default_factory=frozenset)  # flags that take none


GLOBAL_FLAGS = frozenset({"--server", "--tls-server-name", "--config-dir", "--api-key"})
GLOBAL_SWITCHES = frozenset({"--auto_confirm", "--idempotent", "--insecure", "--enable-debug-logs"})

TCLD = {
    ("namespace", "create"): Command(
        flags=frozenset(
            {
                "--request-id",
                "--ca-certificate",
                "--namespace",
                "--region",
                "--retention-days",
                "--auth-method",
                "--ca-certificate-file",
                "--certificate-filter-file",
                "--certificate-filter-input",
                "--search-attribute",
                "--user-namespace-permission",
                "--endpoint",
                "--cloud-provider",
                "--tag",
            }
        ),
        required=frozenset({"--namespace", "--region"}),
        switches=frozenset({"--enable-delete-protection", "--pass-access-token", "--include-credentials"}),
    ),
    ("namespace", "search-attributes", "add"): Command(
        flags=frozenset({"--namespace", "--request-id", "--resource-version", "--search-attribute"}),
        required=frozenset({"--namespace", "--search-attribute"}),
    ),
    ("namespace", "search-attributes", "rename"): Command(
        flags=frozenset(
            {"--namespace", "--request-id", "--resource-version", "--existing-name", "--new-name"}
        ),
        required=frozenset({"--namespace", "--existing-name", "--new-name"}),
    ),
    ("namespace", "update-codec-server"): Command(
        flags=frozenset({"--namespace", "--endpoint"}),
        required=frozenset({"--namespace", "--endpoint"}),
        switches=frozenset({"--pass-access-token", "--include-credentials"}),
    ),
}
AUTH_METHODS = {"restricted", "mtls", "api_key", "api_key_or_mtls"}
NEEDS_CA = {"mtls", "api_key_or_mtls"}  # tcld's default is mtls
SEARCH_ATTRIBUTE_TYPES = {"Keyword", "Text", "Int", "Double", "Datetime", "Bool", "KeywordList"}


def problems(line: str) -> list[str]:
    """What tcld would refuse in this command line (empty: it takes it)."""
    words = shlex.split(line)
    assert words[0] == "tcld", line
    path = tuple(word for word in words[1:] if not word.startswith("-"))
    command = next((TCLD[path[:n]] for n in range(len(path), 0, -1) if path[:n] in TCLD), None)
    if command is None:
        return [f"no tcld command {' '.join(path)!r} in the table"]
    given: dict[str, list[str]] = {}
    rest = words[1 + len(next(key for key in TCLD if TCLD[key] is command)) :]
    found: list[str] = []
    while rest:
        flag, *rest = rest
        if flag in command.switches or flag in GLOBAL_SWITCHES:
            given.setdefault(flag, [])
        elif flag in command.flags or flag in GLOBAL_FLAGS:
            if not rest:
                found.append(f"{flag} needs a value")
                break
            value, *rest = rest
            given.setdefault(flag, []).append(value)
        else:
            found.append(f"tcld has no flag {flag} here")
            if rest and not rest[0].startswith("-"):
                rest = rest[1:]  # its value
    found += [f"{flag} is required" for flag in sorted(command.required - set(given))]
    for pair in given.get("--search-attribute", []):
        kind = pair.partition("=")[2]
        if kind not in SEARCH_ATTRIBUTE_TYPES:
            found.append(f"search attribute {pair!r}: {kind!r} is not one of tcld's types")
    if command is TCLD[("namespace", "create")]:
        method = given.get("--auth-method", ["mtls"])[-1]
        if method not in AUTH_METHODS:
            found.append(f"--auth-method {method}: not one of {sorted(AUTH_METHODS)}")
        has_ca = "--ca-certificate" in given or "--ca-certificate-file" in given
        if method in NEEDS_CA and not has_ca:
            found.append(f"--auth-method {method} needs --ca-certificate or --ca-certificate-file")
        if int(given.get("--retention-days", ["30"])[-1]) < 1:
            found.append("--retention-days must be at least 1")
    return found


def test_the_table_catches_the_mistakes_it_is_for() -> None:
    assert problems(
        "tcld namespace create --namespace settled --region aws-us-east-1 --retention-days 30"
    ) == ["--auth-method mtls needs --ca-certificate or --ca-certificate-file"]
    assert problems("tcld namespace search-attributes add --namespace n --search-attributes A=Keyword") == [
        "tcld has no flag --search-attributes here",
        "--search-attribute is required",
    ]
    assert problems('tcld namespace search-attributes add --namespace n --search-attribute "A=keyword"') == [
        "search attribute 'A=keyword': 'keyword' is not one of tcld's types"
    ]
    assert problems("tcld namespace update-codec-server --namespace n") == ["--endpoint is required"]


def _printed() -> list[str]:
    """Every tcld command the checks can print, for each case they print one."""
    declared = visibility.declared()
    first, *others = declared
    fixes = [
        namespace_fixes("settled.acct", mtls=False),
        namespace_fixes("settled.acct", mtls=True),
        attribute_fixes("settled.acct", declared, {}),
        attribute_fixes("settled.acct", {name: declared[name] for name in others}, {first: declared[first]}),
        attribute_fixes("settled.acct", {}, declared),
    ]
    return [
        part.strip()
        for fix in fixes
        for part in fix["Temporal Cloud"].split("&&")
        if part.strip().startswith("tcld ")
    ]


def _documented() -> list[str]:
    """Every tcld command in the README and docs/, as written between backticks (an abbreviation
    with `…` points at a whole command elsewhere and is left out)."""
    commands = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for span in re.findall(r"`(tcld [^`]+)`", path.read_text()):
            if "…" not in span:
                commands.append(" ".join(span.split()))
    return commands


def test_the_checks_print_tcld_commands() -> None:
    printed = _printed()
    assert any("--auth-method api_key" in line for line in printed)
    assert any("--auth-method mtls --ca-certificate-file" in line for line in printed)
    assert any(line.startswith("tcld namespace search-attributes rename") for line in printed)


def test_the_docs_show_a_tcld_command_for_each_auth_method() -> None:
    documented = _documented()
    creates = [line for line in documented if line.startswith("tcld namespace create")]
    assert any("--auth-method api_key" in line for line in creates), creates
    assert any("--auth-method mtls" in line for line in creates), creates


@pytest.mark.parametrize("line", _printed() + _documented())
def test_every_tcld_command_settled_prints_or_documents_uses_tclds_own_flags(line: str) -> None:
    assert problems(line) == [], line
