"""The credentials a kind reads from the environment reach the real services (which check them) and
nowhere else: not an action's status, the kinds list, metrics or any part's log."""

import base64

import httpx

from settled.runtime.stack import Stack
from tests.helpers import create, new_id, wait_state
from tests.services.servers import LocalStripe, ProxyThread, Radicale, StripeRecords


def test_the_credentials_reach_the_services_and_nothing_else(
    services_stack: Stack,
    services_api: httpx.Client,
    localstripe: LocalStripe,
    radicale: Radicale,
    stripe_proxy: ProxyThread,
    caldav_proxy: ProxyThread,
    stripe_records: StripeRecords,
) -> None:
    refund, booking = new_id("cred-refund"), new_id("cred-booking")
    charge = stripe_records.charge(5000)
    create(services_api, "refund", {"charge": charge, "amount": 100}, operation_id=refund, authorized=True)
    create(
        services_api,
        "room_booking",
        {"room": "Ada", "day": "20261211"},
        operation_id=booking,
        authorized=True,
    )
    for op in (refund, booking):
        wait_state(services_api, op, "confirmed", timeout_s=30)
    # What the services were sent, and accepted (both refuse anything else: see the 401 tests).
    [refund_post] = stripe_proxy.forwarded(refund, "POST")
    assert refund_post.headers["authorization"] == f"Bearer {localstripe.api_key}"
    assert refund_post.headers["stripe-version"] == "2024-06-20"
    [booking_put] = caldav_proxy.forwarded(booking, "PUT")
    basic = base64.b64encode(f"{radicale.user}:{radicale.password}".encode()).decode()
    assert booking_put.headers["authorization"] == f"Basic {basic}"

    seen = {
        "statuses": " ".join(services_api.get(f"/v1/actions/{op}").text for op in (refund, booking)),
        "kinds": services_api.get("/v1/kinds").text,
        "api metrics": services_api.get("/metrics").text,
        "worker metrics": httpx.get(services_stack.worker_metrics_url).text,
    }
    for log in (services_stack.data_dir / "logs").glob("*.log"):
        seen[f"log {log.name}"] = log.read_text(errors="replace")
    assert "{secret.STRIPE_API_KEY}" not in seen["kinds"] and refund in seen["statuses"]
    secrets = {
        "the Stripe key": localstripe.api_key,
        "the CalDAV password": radicale.password,
        "the CalDAV credentials, encoded": basic,
    }
    for where, text in seen.items():
        for name, value in secrets.items():
            assert value not in text, f"{name} is in {where}"
