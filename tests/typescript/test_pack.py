"""The tarball `npm pack` makes, installed into a fresh app beside each supported framework version:
the app's TypeScript (the adapter's own tests and example, as an app would write them) type-checks
there (`tsc --noEmit`), and the adapter's tests pass against this session's real stack, on the Node.js
that framework version declares (Node 22 comes from the npm registry's node-linux-* package)."""

import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from settled.runtime.stack import Stack
from tests.typescript.conftest import PACKAGE, npm


@dataclass(frozen=True)
class Case:
    frameworks: dict[str, str]
    tests: tuple[str, ...]
    examples: tuple[str, ...]
    node: int  # the major version of Node.js the framework declares, at the least


CASES = {
    # The AI SDK: the lowest 6 the peer range admits, and 7 (which declares Node 22).
    "ai-6.0.325": Case({"ai": "6.0.325"}, ("ai-sdk",), ("ai-sdk-chat",), node=20),
    "ai-7.0.185": Case({"ai": "7.0.185"}, ("ai-sdk",), ("ai-sdk-chat",), node=22),
    # openai 7.60, which @openai/agents-realtime brings, declares Node 22.
    "agents-realtime-0.20.0": Case(
        {"@openai/agents-realtime": "0.20.0"}, ("openai-realtime",), ("realtime-call",), node=22
    ),
    "livekit-agents-1.9.0": Case(
        {"@livekit/agents": "1.9.0", "@livekit/rtc-node": "0.13.34"},
        ("livekit",),
        ("livekit-scripted", "livekit-call"),
        node=20,
    ),
}

TSCONFIG = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "lib": ["ES2022", "DOM", "DOM.Iterable"],
        "strict": True,
        "noUncheckedIndexedAccess": True,
        "types": ["node"],
        "rootDir": ".",
        "outDir": "build",
        # The frameworks' own declarations are theirs to check; settled's are checked in use.
        "skipLibCheck": True,
    },
    "include": ["test", "examples"],
}


def run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def tarball(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`npm pack` (its `prepack` builds first); the tarball holds the sources its maps point to."""
    into = tmp_path_factory.mktemp("pack")
    packed = npm("pack", "--json", "--pack-destination", str(into))
    assert packed.returncode == 0, packed.stderr
    [listing] = json.loads(packed.stdout)
    files = {entry["path"] for entry in listing["files"]}
    maps = [path for path in files if path.endswith(".js.map")]
    assert maps, files
    for path in maps:
        sources = json.loads((PACKAGE / path).read_text(encoding="utf-8"))["sources"]
        for source in sources:
            assert os.path.normpath(os.path.join(os.path.dirname(path), source)) in files, (path, source)
    return into / listing["filename"]


@pytest.fixture(scope="module")
def node22(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Node.js 22, from the npm registry (the machine's own is 20)."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}[platform.machine()]
    folder = tmp_path_factory.mktemp("node22")
    run(["npm", "install", "--no-audit", "--no-fund", f"node-linux-{arch}@22"], cwd=folder, timeout=300)
    node = folder / "node_modules" / f"node-linux-{arch}" / "bin" / "node"
    assert run([str(node), "--version"], cwd=folder, timeout=30).startswith("v22."), node
    return node


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(CASES))
def test_the_packed_package_installs_type_checks_and_passes_beside_each_framework_version(
    name: str, tarball: Path, node22: Path, stack: Stack, tmp_path: Path
) -> None:
    case = CASES[name]
    ours = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))["devDependencies"]
    app = tmp_path / "app"
    (app / "test").mkdir(parents=True)
    (app / "examples").mkdir()
    manifest = {
        "name": "an-app",
        "private": True,
        "type": "module",
        "dependencies": {"@settled/client": f"file:{tarball}", **case.frameworks},
        "devDependencies": {"typescript": ours["typescript"], "@types/node": ours["@types/node"]},
    }
    (app / "package.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    (app / "tsconfig.json").write_text(json.dumps(TSCONFIG, indent=2), encoding="utf-8")
    for test in (*case.tests, "support"):
        suffix = "" if test == "support" else ".test"
        shutil.copy(PACKAGE / "test" / f"{test}{suffix}.ts", app / "test")
    for example in case.examples:
        shutil.copy(PACKAGE / "examples" / f"{example}.ts", app / "examples")

    run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=app, timeout=400)
    installed = json.loads((app / "node_modules" / "@settled" / "client" / "package.json").read_text())
    assert installed["version"] == json.loads((PACKAGE / "package.json").read_text())["version"]
    for framework, version in case.frameworks.items():
        assert (
            json.loads((app / "node_modules" / framework / "package.json").read_text())["version"] == version
        )
    tsc = str(app / "node_modules" / ".bin" / "tsc")
    run([tsc, "--noEmit", "-p", "."], cwd=app, timeout=300)
    run([tsc, "-p", "."], cwd=app, timeout=300)

    node = "node" if case.node == 20 else str(node22)
    env = {**os.environ, "SETTLED_API_URL": stack.api_url, "SETTLED_SANDBOX_URL": stack.sandbox_url}
    suites = [f"build/test/{test}.test.js" for test in case.tests]
    out = run([node, "--test", *suites], cwd=app, timeout=300, env=env)
    assert "# fail 0" in out and "# skipped 0" in out and "# pass 0" not in out, out[-3000:]
