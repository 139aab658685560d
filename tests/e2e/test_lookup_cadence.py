"""Inside the commit horizon the lookups keep their cadence: a write that commits late is confirmed at
the next lookup after it lands, not when the horizon has passed, and no 404 before the horizon ends the
action or sends the write again.

The sandbox holds the write where lookups cannot see it (`unseen`: they answer 404) and commits it
10 s after it arrived, long after the client gave up (1 s); the kind's horizon is 30 s and its lookups
are at most 2 s apart. The action's own history says when it was sent and when it was confirmed.
"""

from datetime import datetime, timedelta

import httpx

from settled.domain.kinds import Variant
from tests.e2e.conftest import StackOptions
from tests.helpers import REFUND, TEST_KINDS, Sandbox, create, new_id, states_seen, wait_state

HORIZON_S = 30.0
LATE_S = 10.0
MAX_INTERVAL_S = 2.0
# A service without deduplication, whose writes may commit up to 30 s after the client gave up.
LATE_REFUND: Variant = TEST_KINDS["refund_nodedup"].but(
    commit_horizon_s=HORIZON_S,
    reconcile_initial_interval_s=1.0,
    reconcile_max_interval_s=MAX_INTERVAL_S,
    attention_after_s=300.0,
)
STACK = StackOptions({**TEST_KINDS, "late_refund": LATE_REFUND})
SETTLED = ("confirmed", "failed", "cancelled")


def _at(entry: dict) -> datetime:
    return datetime.fromisoformat(entry["at"])


def _sent_late(api: httpx.Client, sandbox: Sandbox, **extra: object) -> str:
    """An action whose write commits LATE_S after it reached the service, unseen by lookups until then."""
    op = new_id("late")
    sandbox.fault("refunds", "create", "delay", op, unseen=True, delay_s=LATE_S)
    answer = create(api, "late_refund", REFUND, operation_id=op, **extra)
    assert answer.status_code in (200, 201, 202), answer.text
    return op


def _lookups(sandbox: Sandbox, op: str) -> list[int]:
    return [row["status"] for row in sandbox.requests(op, op="lookup") if row["state"] == "done"]


def test_a_write_that_lands_inside_the_horizon_is_confirmed_at_the_next_lookup(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    op = _sent_late(module_api, module_sandbox)
    final = wait_state(module_api, op, *SETTLED, timeout_s=HORIZON_S + 60)

    assert final["state"] == "confirmed" and final["attempts"] == 1, final
    [record] = module_sandbox.records(op, "refunds")
    assert final["business_ref"] == record["id"] and len(module_sandbox.writes(op)) == 1
    lookups = _lookups(module_sandbox, op)
    assert lookups[-1] == 200 and set(lookups[:-1]) == {404} and len(lookups) >= 2, lookups
    # Confirmed after the write landed, and well before the horizon had passed: at the next lookup.
    sent = next(_at(entry) for entry in final["history"] if entry["state"] == "running")
    confirmed = _at(final["history"][-1])
    assert timedelta(seconds=LATE_S) <= confirmed - sent < timedelta(seconds=HORIZON_S), final["history"]
    assert states_seen(final) == ["requested", "running", "unknown", "confirmed"]


def test_a_404_before_the_horizon_neither_ends_a_cancelled_action_nor_resends(
    module_api: httpx.Client, module_sandbox: Sandbox
) -> None:
    """A cancel asked while the write may still land: the early 404s never make it "never applied"
    (`cancelled`) or `failed`; the write lands, and the truth is that it stands."""
    op = _sent_late(module_api, module_sandbox)
    wait_state(module_api, op, "unknown")
    cancel = module_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 1})
    assert cancel.status_code == 200 and cancel.json()["state"] == "unknown", cancel.text

    final = wait_state(module_api, op, *SETTLED, timeout_s=HORIZON_S + 60)
    assert 404 in _lookups(module_sandbox, op)
    assert (final["state"], final["cancel_requested"]) == ("confirmed", True), final
    assert "too late" in final["say"]
    assert len(module_sandbox.records(op, "refunds")) == 1 and len(module_sandbox.writes(op)) == 1
    assert final["attempts"] == 1 and "cancelled" not in states_seen(final)
