"""The drill's own stack: settled.stack.Stack on free ports, with kinds that reconcile quickly."""

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from settled.stack import Stack

# The sandbox kinds, with reconciliation fast enough for a drill (the defaults look up after 1 s
# and back off to a minute). The first lookup still waits long enough that an "in transit" cut
# reliably falls before it; interruptions and channel openings reconcile at once anyway. The sandbox
# commits at most a few seconds late (C7), so a 5 s commit horizon is safe.
DRILL_KINDS = """\
[kinds.room_booking]
description = "reserve the meeting room"
requires_authorization = true
params_schema = { type = "object", required = ["room", "day"], additionalProperties = false, \
properties = { room = { type = "string", minLength = 1 }, day = { type = "string", minLength = 1 } } }
dispatch = { method = "POST", url = "@SANDBOX_URL@/bookings" }
lookup = { method = "GET", url = "@SANDBOX_URL@/bookings/by-key/{operation_id}", authoritative = true }
compensate = { method = "POST", url = "@SANDBOX_URL@/bookings/{business_ref}/cancel" }
idempotency_header = "Idempotency-Key"
operation_field = "client_reference"
timeout_s = @TIMEOUT_S@
commit_horizon_s = 5.0
reconcile_initial_interval_s = 0.5
reconcile_max_interval_s = 1.0
attention_after_s = 5.0

[kinds.room_booking.say]
confirmed = "Room {params.room} is reserved for {params.day}. Your confirmation is {business_ref}."

[kinds.refund]
description = "refund the order"
requires_authorization = true
params_schema = { type = "object", required = ["order_id", "amount", "currency"], \
additionalProperties = false, properties = { order_id = { type = "string", minLength = 1 }, \
amount = { type = "number", exclusiveMinimum = 0 }, currency = { type = "string", pattern = "^[A-Z]{3}$" } } }
dispatch = { method = "POST", url = "@SANDBOX_URL@/refunds" }
lookup = { method = "GET", url = "@SANDBOX_URL@/refunds/by-key/{operation_id}", authoritative = true }
idempotency_header = "Idempotency-Key"
operation_field = "client_reference"
timeout_s = @TIMEOUT_S@
commit_horizon_s = 5.0
reconcile_initial_interval_s = 0.5
reconcile_max_interval_s = 1.0
attention_after_s = 5.0

[kinds.refund.say]
confirmed = "The refund of {params.amount} {params.currency} for order {params.order_id} is done. \
Your reference is {business_ref}."
"""


# The sandbox kinds' dispatch timeout; C7's late commit lands a second after it, inside the horizon.
DRILL_TIMEOUT_S = 2.0


def drill_kinds(sandbox_url: str) -> str:
    return DRILL_KINDS.replace("@SANDBOX_URL@", sandbox_url).replace("@TIMEOUT_S@", f"{DRILL_TIMEOUT_S}")


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
