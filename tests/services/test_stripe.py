"""The refund kind of examples/kinds/payments.toml (the Stripe API as a kinds file) against localstripe
behind a fault proxy, through a real settled stack. Every verdict is read from localstripe's own
records: the charge's refunds, each with the operation key in its metadata.

localstripe ignores Idempotency-Key, so the kind runs without it (tests/services/conftest.py): a refund
whose answer was lost must be looked up in the charge's refund list, never sent again blindly.
"""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import free_port
from tests.helpers import create, new_id, states_seen, status, wait_state
from tests.services.conftest import EXAMPLES
from tests.services.servers import ProxyThread, StripeRecords

SETTLE_S = 30.0


def refund(api: httpx.Client, charge: str, amount: int, kind: str = "refund", **extra: object) -> str:
    op = new_id("refund")
    answer = create(
        api, kind, {"charge": charge, "amount": amount}, operation_id=op, authorized=True, **extra
    )
    assert answer.status_code == 201, answer.text
    return op


def test_a_refund_is_confirmed_once(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = refund(services_api, charge, 1500, wait=10)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [made] = stripe_records.refunds(charge)
    assert made["metadata"] == {"operation_id": op} and made["amount"] == 1500
    assert done["business_ref"] == made["id"] and done["claim"] == "done"
    assert len(stripe_proxy.forwarded(op, "POST")) == 1


def test_a_refund_whose_answer_is_lost_is_found_not_made_twice(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = new_id("refund")
    stripe_proxy.fault("drop_after_forward", method="POST", path="^/v1/refunds$", match=op)
    create(services_api, "refund", {"charge": charge, "amount": 700}, operation_id=op, authorized=True)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [made] = stripe_records.refunds(charge)
    assert done["business_ref"] == made["id"] and "unknown" in states_seen(done)
    assert len(stripe_proxy.forwarded(op, "POST")) == 1  # looked up, never sent again
    assert stripe_proxy.forwarded(charge, "GET"), "the refund list was never read"


@pytest.mark.parametrize("mode", ["unavailable", "refuse"])
def test_a_refund_lost_before_stripe_is_never_mistaken_for_another_refund_of_the_charge(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords, mode: str
) -> None:
    """503 (or a cut connection) before the request reached localstripe, while the charge already has
    a refund made by hand: the lookup lists that refund, which is not ours. Not done until ours exists."""
    charge = stripe_records.charge(5000)
    by_hand = stripe_records.refund_outside(charge, 300)
    op = new_id("refund")
    stripe_proxy.fault(mode, method="POST", path="^/v1/refunds$", match=op)  # mode: ProxyMode
    create(services_api, "refund", {"charge": charge, "amount": 900}, operation_id=op, authorized=True)
    unknown = wait_state(services_api, op, "unknown", "confirmed", timeout_s=SETTLE_S)
    assert unknown["state"] == "unknown", "called done while only someone else's refund existed"
    assert [r["id"] for r in stripe_records.refunds(charge)] == [by_hand["id"]]
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [ours] = stripe_records.refunds_for(charge, op)
    assert done["business_ref"] == ours["id"] != by_hand["id"] and ours["amount"] == 900
    assert len(stripe_records.refunds(charge)) == 2
    assert len(stripe_proxy.forwarded(op, "POST")) == 1  # the re-send, after the commit horizon


def test_a_refund_held_past_the_timeout_that_lands_late_is_found_once(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = new_id("refund")
    hold = stripe_proxy.fault("hold", method="POST", path="^/v1/refunds$", match=op)
    create(services_api, "refund_late", {"charge": charge, "amount": 400}, operation_id=op, authorized=True)
    wait_state(services_api, op, "unknown", timeout_s=SETTLE_S)
    assert stripe_records.refunds(charge) == []
    stripe_proxy.release(hold)  # the service commits it now, after settled gave up waiting
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [made] = stripe_records.refunds(charge)
    assert done["business_ref"] == made["id"]
    assert len(stripe_proxy.forwarded(op, "POST")) == 1


def test_a_refund_stripe_refuses_fails_with_its_reason(
    services_api: httpx.Client, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.declined_charge()
    op = refund(services_api, charge, 500, wait=10)
    failed = wait_state(services_api, op, "failed", timeout_s=SETTLE_S)
    assert "Cannot refund a failed payment" in (failed["reason"] or ""), failed["reason"]
    assert failed["claim"] == "not_done" and stripe_records.refunds(charge) == []


def test_a_wrong_key_fails_saying_stripe_refused_our_credentials(
    services_api: httpx.Client, localstripe: object, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = refund(services_api, charge, 500, kind="refund_wrong_key", wait=10)
    failed = wait_state(services_api, op, "failed", timeout_s=SETTLE_S)
    assert "refused our credentials" in (failed["reason"] or ""), failed["reason"]
    assert "401" in failed["reason"] and stripe_records.refunds(charge) == []


def test_a_confirmed_refund_cannot_be_reversed(
    services_api: httpx.Client, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = refund(services_api, charge, 250, wait=10)
    wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    services_api.post(f"/v1/actions/{op}/cancel", json={"by": "caller"}, params={"wait": 5})
    after = status(services_api, op)
    assert after["state"] == "confirmed" and not after["compensated"]
    assert len(stripe_records.refunds(charge)) == 1


def start_worker_without(
    kinds_file: Path, secret: str, value: str | None
) -> subprocess.CompletedProcess[str]:
    """`settled worker` on a kinds file with the secret `secret` unset (None) or empty. Temporal's address
    is a port nothing listens on: a worker that did not refuse would find nothing to serve."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLED_", secret))}
    env |= {"SETTLED_CONFIG": str(kinds_file), "SETTLED_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    env["SETTLED_WORKER_METRICS_PORT"] = str(free_port())
    if value is not None:
        env[secret] = value
    argv = [sys.executable, "-m", "settled", "worker"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", [None, ""])
@pytest.mark.parametrize(
    ("example", "secret"), [("payments.toml", "STRIPE_API_KEY"), ("calendar.toml", "CALDAV_PASSWORD")]
)
def test_each_example_refuses_to_start_without_its_secret(
    example: str, secret: str, value: str | None
) -> None:
    """An example kinds file as it is, its secret unset or empty: `settled worker` exits 2, naming it."""
    run = start_worker_without(EXAMPLES / example, secret, value)
    assert run.returncode == 2, f"{run.returncode}\n{run.stdout}\n{run.stderr}"
    assert f"the secret {secret} is not set" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
