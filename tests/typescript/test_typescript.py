"""The TypeScript package's own suite (`typescript/`, run with `node --test`) against this session's
real stack: its client, its adapters driving the real `@openai/agents-realtime` and `ai` packages,
judged by the sandbox's records. Its output is passed through; its exit code is the verdict."""

import os
import time
from pathlib import Path

from settled.runtime.stack import Stack
from tests.typescript.conftest import npm


def test_the_typescript_suite_passes_against_a_real_stack(built: Path, stack: Stack) -> None:
    env = {**os.environ, "SETTLED_API_URL": stack.api_url, "SETTLED_SANDBOX_URL": stack.sandbox_url}
    started = time.monotonic()
    run = npm("test", env=env)
    print(run.stdout, run.stderr, f"the TypeScript suite took {time.monotonic() - started:.1f} s", sep="\n")
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert "# fail 0" in run.stdout and "# skipped 0" in run.stdout, run.stdout[-2000:]
