"""The drill's own stack: settled.runtime.stack.Stack on free ports, with kinds that reconcile quickly."""

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from settled.domain.kinds import Variant, sandbox_kinds_text
from settled.runtime.stack import Stack

# The sandbox kinds' dispatch timeout; C7's late commit lands a second after it, inside the horizon.
DRILL_TIMEOUT_S = 2.0

# The sandbox kinds, with reconciliation fast enough for a drill (the defaults look up after 1 s
# and back off to a minute). The first lookup still waits long enough that an "in transit" cut
# reliably falls before it; interruptions and channel openings reconcile at once anyway. The sandbox
# commits at most a few seconds late (C7), so a 5 s commit horizon is safe.
_DRILL: dict[str, Any] = {
    "timeout_s": DRILL_TIMEOUT_S,
    "commit_horizon_s": 5.0,
    "reconcile_initial_interval_s": 0.5,
    "reconcile_max_interval_s": 1.0,
    "attention_after_s": 5.0,
}
DRILL_KINDS: dict[str, Variant] = {name: Variant(name, _DRILL) for name in ("room_booking", "refund")}


def drill_kinds(sandbox_url: str) -> str:
    return sandbox_kinds_text(sandbox_url, DRILL_KINDS)


@asynccontextmanager
async def own_stack(kinds_text: str | None = None, with_sandbox: bool = True) -> AsyncIterator[Stack]:
    """A whole stack in a temporary data dir (kept, with its logs, only if the drill fails)."""
    data_dir = Path(tempfile.mkdtemp(prefix="settled-drill-"))
    # Left as a placeholder, the sandbox URL is filled in by the stack with its own sandbox's.
    template = kinds_text or drill_kinds("@SANDBOX_URL@")
    stack = Stack.on_free_ports(data_dir, template, sandbox=with_sandbox, ui=False)
    await asyncio.to_thread(stack.start)
    failed = True
    try:
        yield stack
        failed = False
    finally:
        await asyncio.to_thread(stack.stop)
        if failed:
            print(f"drill: the stack's data and logs are kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
