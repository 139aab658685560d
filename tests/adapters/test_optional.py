"""`import adapters` works without any framework; each adapter says which extra it needs."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_FRAMEWORKS = """
import importlib.abc, sys

class NoFrameworks(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("agents", "pipecat", "livekit") or name.startswith("google.adk"):
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoFrameworks())
import adapters, adapters.common
print("core ok")
for module in ("settled.adapters.openai_agents", "settled.adapters.pipecat", "settled.adapters.livekit",
               "settled.adapters.google_adk"):
    try:
        __import__(module)
    except ImportError as error:
        print(error)
"""


def test_the_core_imports_without_frameworks_and_each_adapter_names_its_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FRAMEWORKS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "core ok",
        "adapters.openai_agents needs the OpenAI Agents SDK: pip install 'settled[openai-agents]'",
        "adapters.pipecat needs Pipecat: pip install 'settled[pipecat]'",
        "adapters.livekit needs LiveKit Agents: pip install 'settled[livekit]'",
        "adapters.google_adk needs Google's Agent Development Kit: pip install 'settled[google-adk]'",
    ]
