"""The same refund as a code kind: examples/handlers/stripe_refund.py, the official Stripe SDK with its
retries off, imported by the stack's worker (`handler = "examples.handlers.stripe_refund:refund"`) and
pointed at localstripe behind the fault proxy ($STRIPE_API_BASE). Judged from localstripe's records."""

import httpx
import pytest

from tests.helpers import create, new_id, states_seen, wait_state
from tests.services.servers import ProxyThread, StripeRecords

SETTLE_S = 30.0
KIND = "refund_sdk"


def test_the_kind_is_offered_without_compensation(services_api: httpx.Client) -> None:
    kinds = {kind["name"]: kind for kind in services_api.get("/v1/kinds").json()["kinds"]}
    assert kinds[KIND]["compensable"] is False
    assert kinds[KIND]["params_schema"]["required"] == ["charge", "amount"]


def test_a_refund_through_the_sdk_is_confirmed_once(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = new_id("sdk")
    create(services_api, KIND, {"charge": charge, "amount": 1100}, operation_id=op, authorized=True, wait=10)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [made] = stripe_records.refunds(charge)
    assert made["metadata"] == {"operation_id": op} and made["amount"] == 1100
    assert done["business_ref"] == made["id"]
    [sent] = stripe_proxy.forwarded(op, "POST")
    assert sent.headers.get("idempotency-key") == op  # what Stripe would deduplicate on


def test_a_refund_whose_answer_is_lost_is_looked_up_not_made_twice(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.charge(5000)
    op = new_id("sdk")
    stripe_proxy.fault("drop_after_forward", method="POST", path="^/v1/refunds$", match=op)
    create(services_api, KIND, {"charge": charge, "amount": 600}, operation_id=op, authorized=True)
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [made] = stripe_records.refunds(charge)
    assert done["business_ref"] == made["id"] and "unknown" in states_seen(done)
    assert len(stripe_proxy.forwarded(op, "POST")) == 1  # deduplicates = False: looked up, not re-sent
    assert stripe_proxy.forwarded(charge, "GET")


@pytest.mark.parametrize("mode", ["unavailable", "refuse"])
def test_a_refund_lost_before_stripe_is_made_once_and_not_confused_with_another(
    services_api: httpx.Client, stripe_proxy: ProxyThread, stripe_records: StripeRecords, mode: str
) -> None:
    charge = stripe_records.charge(5000)
    by_hand = stripe_records.refund_outside(charge, 200)
    op = new_id("sdk")
    stripe_proxy.fault(mode, method="POST", path="^/v1/refunds$", match=op)
    create(services_api, KIND, {"charge": charge, "amount": 800}, operation_id=op, authorized=True)
    first = wait_state(services_api, op, "unknown", "confirmed", timeout_s=SETTLE_S)
    assert first["state"] == "unknown", "called done while only someone else's refund existed"
    done = wait_state(services_api, op, "confirmed", timeout_s=SETTLE_S)
    [ours] = stripe_records.refunds_for(charge, op)
    assert done["business_ref"] == ours["id"] != by_hand["id"]
    assert len(stripe_records.refunds(charge)) == 2
    assert len(stripe_proxy.forwarded(op, "POST")) == 1


def test_a_refund_stripe_refuses_fails_with_its_reason(
    services_api: httpx.Client, stripe_records: StripeRecords
) -> None:
    charge = stripe_records.declined_charge()
    op = new_id("sdk")
    create(services_api, KIND, {"charge": charge, "amount": 500}, operation_id=op, authorized=True, wait=10)
    failed = wait_state(services_api, op, "failed", timeout_s=SETTLE_S)
    assert "Cannot refund a failed payment" in (failed["reason"] or ""), failed["reason"]
    assert stripe_records.refunds(charge) == []
