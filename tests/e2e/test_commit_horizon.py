"""A 404 is not proof while the write may still land: the commit horizon, end to end.

The sandbox makes the race happen instead of waiting for luck: a write held at the service where
lookups cannot see it (`unseen`: they answer 404, as a queue or a request still being processed
elsewhere would), released after the client gave up and after a lookup said "not found"; and lookups
served by a replica that lags (`stale`). Reconcile, `interrupted` and cancel are driven into that
window, for a service without deduplication (`payout`) and one with it (`reservation`). A witness
reads the status throughout; every answer, each final state and the records are judged by
`sandbox.truth` (no duplicate, no `done` before a commit, no `not_done` while a record stands).
"""

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.e2e.watch import ClaimWatcher
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, states_seen, status, wait_for, wait_state

KINDS = [("payout", REFUND, "refunds"), ("reservation", BOOKING, "bookings")]
SETTLED = ("confirmed", "failed", "cancelled")


@pytest.fixture
def witness(stack: Stack, api: httpx.Client, sandbox: Sandbox) -> Iterator[ClaimWatcher]:
    with ClaimWatcher(stack.api_url) as watcher:
        yield watcher
        verdict = watcher.verdict(api, sandbox.http)
        assert verdict.ok, verdict.violations


def sent_and_unseen(api: httpx.Client, sandbox: Sandbox, kind: str, params: dict, service: str) -> tuple:
    """An action whose write is held, unseen, at the service after the client gave up on it."""
    op = new_id(kind)
    conversation = new_id("conv")
    hold = sandbox.fault(service, "create", "hold", op, unseen=True, apply=True)
    create(api, kind, params, operation_id=op, conversation_id=conversation, authorized=True)
    sandbox.wait_held(op)
    wait_state(api, op, "unknown")  # the 1 s timeout passed: the client gave up, the write did not
    return op, conversation, hold


def reconcile(api: httpx.Client, op: str, conversation: str) -> dict[str, Any]:
    answer = api.post(f"/v1/actions/{op}/reconcile", params={"wait": 3})
    assert answer.status_code == 200, answer.text
    return answer.json()


def interrupted(api: httpx.Client, op: str, conversation: str) -> dict[str, Any]:
    event = {"type": "interrupted", "channel": "voice"}
    answer = api.post(f"/v1/conversations/{conversation}/events", json=event)
    assert answer.status_code == 202 and answer.json()["reconciling"] == [op], answer.text
    return wait_for(lambda: _looked_up(api, op), what=f"the lookup the event started for {op}")


def _looked_up(api: httpx.Client, op: str) -> dict[str, Any] | None:
    current = status(api, op)
    return current if any(entry["event"] == "lookup" for entry in current.get("log", [])) else None


def lookups(sandbox: Sandbox, op: str) -> list[int]:
    return [row["status"] for row in sandbox.requests(op, op="lookup") if row["state"] == "done"]


TRIGGERS: dict[str, Callable[[httpx.Client, str, str], dict[str, Any]]] = {
    "reconcile": reconcile,
    "interrupted": interrupted,
}


@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize(("kind", "params", "service"), KINDS)
def test_a_404_inside_the_horizon_neither_resends_nor_concludes(
    api: httpx.Client,
    sandbox: Sandbox,
    witness: ClaimWatcher,
    trigger: str,
    kind: str,
    params: dict,
    service: str,
) -> None:
    op, conversation, hold = sent_and_unseen(api, sandbox, kind, params, service)
    witness.watch(op)

    answer = TRIGGERS[trigger](api, op, conversation)
    assert 404 in lookups(sandbox, op) and 200 not in lookups(sandbox, op)  # "not found", too soon
    if kind == "payout":
        assert (answer["state"], answer["claim"]) == ("unknown", "unknown") and "checking" in answer["say"]
    else:  # a service that deduplicates may be sent the same key again: still nothing concluded
        assert answer["claim"] in ("unknown", "in_progress")
    handoff = api.get(f"/v1/conversations/{conversation}/handoff").json()
    assert handoff["work"] == "continuing" and handoff["actions"][0]["claim"] in ("unknown", "in_progress")

    sandbox.release(hold)  # the write lands after the client timed out and after the lookup said 404
    final = wait_state(api, op, *SETTLED)
    assert final["state"] == "confirmed"
    records = sandbox.records(op, service)
    assert len(records) == 1 and final["business_ref"] == records[0]["id"]
    if kind == "payout":  # no deduplication: never sent a second time
        assert len(sandbox.writes(op)) == 1 and final["attempts"] == 1


@pytest.mark.parametrize(("kind", "params", "service"), KINDS)
def test_a_cancel_inside_the_horizon_is_not_answered_never_applied(
    api: httpx.Client, sandbox: Sandbox, witness: ClaimWatcher, kind: str, params: dict, service: str
) -> None:
    op, _, hold = sent_and_unseen(api, sandbox, kind, params, service)
    witness.watch(op)

    answer = api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 2}).json()
    assert answer["state"] == "unknown" and answer["cancel_requested"] is True
    assert "checking before I can cancel" in answer["say"]

    sandbox.release(hold)
    final = wait_state(api, op, "cancelled", "failed", timeout_s=20) if kind == "reservation" else None
    [record] = sandbox.records(op, service)
    if kind == "reservation":  # it landed: reversed by a compensation, never "never applied"
        assert final is not None and (final["state"], final["compensated"]) == ("cancelled", True)
        assert final["business_ref"] == record["id"]
        wait_for(lambda: sandbox.records(op, service)[0]["status"] == "cancelled", what="the reversal")
    else:  # it landed and cannot be reversed: the truth is that it stands
        final = wait_for(lambda: _settled(api, op), what=f"{op} settled")
        assert (final["state"], final["claim"]) == ("confirmed", "done")
        assert "too late" in final["say"] and len(sandbox.writes(op)) == 1


def _settled(api: httpx.Client, op: str) -> dict[str, Any] | None:
    current = status(api, op)
    return current if current["state"] in SETTLED else None


def test_a_write_that_never_lands_is_re_sent_once_the_horizon_has_passed(
    api: httpx.Client, sandbox: Sandbox, witness: ClaimWatcher
) -> None:
    """The horizon costs time, not truth: a request that was really lost is sent again after it."""
    op = new_id("payout")
    hold = sandbox.fault("refunds", "create", "hold", op, unseen=True, apply=False)
    create(api, "payout", REFUND, operation_id=op, authorized=True)
    witness.watch(op)
    sandbox.wait_held(op)
    wait_state(api, op, "unknown")
    # The send's own call looked it up at once, and the reconcile may look again: only 404s so far.
    assert reconcile(api, op, "")["state"] == "unknown" and set(lookups(sandbox, op)) == {404}
    sandbox.release(hold)  # given up without applying
    final = wait_state(api, op, "confirmed", timeout_s=20)
    assert len(sandbox.records(op, "refunds")) == 1
    assert (final["attempts"], len(sandbox.writes(op))) == (2, 2)
    assert states_seen(final).count("running") == 2


def test_a_lagging_lookup_never_causes_a_second_payout(
    api: httpx.Client, sandbox: Sandbox, witness: ClaimWatcher
) -> None:
    """The write landed and its answer was lost; the lookups read a replica 2 s behind."""
    op = new_id("payout")
    sandbox.fault("refunds", "lookup", "stale", op, delay_s=2.0, count=0)
    sandbox.fault("refunds", "create", "drop_after_apply", op)
    create(api, "payout", REFUND, operation_id=op, authorized=True)
    witness.watch(op)
    wait_state(api, op, "unknown")
    assert reconcile(api, op, "")["state"] == "unknown"  # the replica has not seen it yet
    final = wait_state(api, op, "confirmed", timeout_s=20)  # looked up again after the horizon
    seen = lookups(sandbox, op)  # the send's own call's and the reconcile's (if not just made): 404s
    assert seen[-1] == 200 and set(seen[:-1]) == {404}, seen
    assert len(sandbox.records(op, "refunds")) == 1 and len(sandbox.writes(op)) == 1
    assert final["attempts"] == 1
