"""Test helpers: waiting on conditions with a deadline, and the sandbox's ground truth."""

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from settled.domain.kinds import PLAIN_BOOKING_PARAMS, PLAIN_REFUND_PARAMS, Variant
from settled.runtime.stack import Ports, Stack, free_port

T = TypeVar("T")

# The end-to-end tests' kinds: the sandbox services with fast reconciliation. The sandbox commits a
# write while answering it, except under an `unseen` fault, so a 2 s commit horizon is safe here.
FAST: dict[str, Any] = {
    "timeout_s": 1.0,
    "commit_horizon_s": 2.0,
    "reconcile_initial_interval_s": 0.2,
    "reconcile_max_interval_s": 1.0,
}
_REFUND_FIELDS = PLAIN_REFUND_PARAMS["properties"]
_UNKEYED_REFUND = Variant(
    "refund",
    {
        **FAST,
        "requires_authorization": None,
        "params_schema": PLAIN_REFUND_PARAMS,
        "idempotency_header": None,
        "say": None,
    },
)
_SLOW_REFUND = _UNKEYED_REFUND.but(reconcile_initial_interval_s=600, reconcile_max_interval_s=600)
TEST_KINDS: dict[str, Variant] = {
    "room_booking": Variant(
        "room_booking", {**FAST, "attention_after_s": 2.0, "redact_params_after_s": 3600}
    ),
    "refund": Variant(
        "refund",
        {
            **FAST,
            "attention_after_s": 2.0,
            "say": None,
            "params_schema": {  # any order id, even an empty one
                "type": "object",
                "required": ["order_id", "amount", "currency"],
                "additionalProperties": False,
                "properties": {**_REFUND_FIELDS, "currency": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            },
        },
    ),
    # The refund service as a service without deduplication: no idempotency header is sent.
    # Its params are redacted a second after it settles (retention).
    "refund_nodedup": _UNKEYED_REFUND.but(
        attention_after_s=2.0, requires_authorization=False, redact_params_after_s=1.0
    ),
    # Reconciliation so slow that only events trigger lookups: for counting what a burst of events does.
    "refund_slow": _SLOW_REFUND,
    # The late-commit kinds: their services may commit a write up to 4 s after the client gave up (the
    # tests release an unseen held write well inside that), and their lookups may lag. A payout is
    # looked up only when asked (reconcile, an event, a cancel) and when its horizon has passed.
    "payout": _SLOW_REFUND.but(description="pay the refund out", commit_horizon_s=4.0),
    "reservation": Variant(
        "room_booking",
        {
            **FAST,
            "commit_horizon_s": 4.0,
            "requires_authorization": None,
            "params_schema": PLAIN_BOOKING_PARAMS,
            "say": None,
        },
    ),
}

_BOOKINGS = "@SANDBOX_URL@/bookings"
# Kinds of the rules for real services, on the sandbox (tests/e2e/test_services.py, the golden recorder).
SERVICE_KINDS: dict[str, Variant] = {
    # A booking whose reversal (a POST) carries no key: it may never be re-sent blindly. Its dispatch
    # carries the key the bookings service demands, in a header of its own.
    "unkeyed_booking": Variant(
        "room_booking",
        {
            **FAST,
            "requires_authorization": None,
            "say": None,
            "idempotency_header": None,
            "dispatch": {
                "method": "POST",
                "url": _BOOKINGS,
                "headers": {"Idempotency-Key": "{operation_id}"},
            },
            "lookup": {
                "method": "GET",
                "url": _BOOKINGS + "/by-key/{operation_id}",
                "authoritative": True,
                "reversed_when": "status == 'cancelled'",
            },
        },
    ),
    # The sandbox's transfer service accepts first (202 pending) and finishes later.
    "transfer": Variant(
        None,
        {
            "description": "pay out the refund",
            **FAST,
            "params_schema": {
                "type": "object",
                "required": ["destination", "amount", "currency"],
                "properties": {
                    "destination": {"type": "string"},
                    "amount": {"type": "number"},
                    "currency": {"type": "string"},
                },
            },
            "dispatch": {"method": "POST", "url": "@SANDBOX_URL@/transfers"},
            "lookup": {
                "method": "GET",
                "url": "@SANDBOX_URL@/transfers/by-key/{operation_id}",
                "authoritative": True,
            },
            "idempotency_header": "Idempotency-Key",
            "confirmed_when": "status == 'succeeded'",
            "failed_when": "status == 'failed' || status == 'canceled'",
        },
    ),
}
PAYOUT = {"destination": "acct-1", "amount": 40.0, "currency": "EUR"}


@contextmanager
def api_client(stack: Stack, **options: Any) -> Iterator[httpx.Client]:
    """A client of the stack's API (`options` such as headers go to httpx)."""
    with httpx.Client(base_url=stack.api_url, timeout=40, **options) as client:
        yield client


def second_api(stack: Stack, data_dir: Path, **env: str) -> Stack:
    """Another API process on the stack's Temporal server, worker and sandbox, with its own settings
    (API keys, a rate limit): started, its `stop()` left to the caller."""
    ports = Ports(api=free_port(), temporal=stack.ports.temporal, sandbox=stack.ports.sandbox)
    api = Stack(data_dir, ports, config=stack.config, sandbox=False, ui=False, extra_env=env)
    api.start_api()
    return api


@contextmanager
def sandbox_of(stack: Stack) -> Iterator["Sandbox"]:
    """The stack's sandbox: its ground truth and fault controls."""
    with httpx.Client(base_url=stack.sandbox_url, timeout=10) as client:
        yield Sandbox(client)


def healthy(api: httpx.Client) -> bool:
    """Whether the API answers /healthz with 200 (Temporal reachable, a worker polling)."""
    try:
        return api.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(probe: Callable[[], T | None], timeout_s: float = 20.0, what: str = "condition") -> T:
    """Poll `probe` until it returns something truthy; fail with the last value at the deadline."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last: {last!r}")


def new_id(prefix: str = "op") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Sandbox:
    """The business services' ground truth and fault controls, over real HTTP."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def records(self, key: str, service: str | None = None) -> list[dict[str, Any]]:
        params = {"service": service} if service else {}
        rows = self.http.get("/_sandbox/records", params=params).json()["records"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]

    def requests(self, key: str, op: str | None = None) -> list[dict[str, Any]]:
        params = {"op": op} if op else {}
        rows = self.http.get("/_sandbox/requests", params=params).json()["requests"]
        return [row for row in rows if key in (row.get("key"), row.get("client_reference"))]

    def writes(self, key: str) -> list[dict[str, Any]]:
        """Create requests that reached the service for this key."""
        return self.requests(key, op="create")

    def fault(self, service: str, op: str, mode: str, key: str, **extra: Any) -> str:
        body = {"service": service, "op": op, "mode": mode, "match_key": key, **extra}
        response = self.http.post("/_sandbox/faults", json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def release(self, fault_id: str) -> None:
        assert self.http.post(f"/_sandbox/faults/{fault_id}/release").status_code == 200

    def wait_held(self, key: str) -> None:
        wait_for(
            lambda: any(r["state"] == "in_flight" and r["outcome"] == "held" for r in self.writes(key)),
            what=f"a held write for {key}",
        )

    def clear_faults(self) -> None:
        self.http.delete("/_sandbox/faults")


BOOKING = {"room": "Ada", "day": "Thursday"}
REFUND = {"order_id": "o-1001", "amount": 25.5, "currency": "EUR"}


def create(api: httpx.Client, kind: str, params: dict[str, Any], **extra: Any) -> httpx.Response:
    wait = extra.pop("wait", None)
    body = {
        "conversation_id": extra.pop("conversation_id", new_id("conv")),
        "kind": kind,
        "params": params,
        **extra,
    }
    body.setdefault("operation_id", new_id())
    return api.post("/v1/actions", json=body, params={"wait": wait} if wait is not None else None)


def status(api: httpx.Client, operation_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/actions/{operation_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_state(api: httpx.Client, operation_id: str, *states: str, timeout_s: float = 20.0) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        current = status(api, operation_id)
        return current if current["state"] in states else None

    return wait_for(reached, timeout_s, f"{operation_id} to reach {states}")


def states_seen(action: dict[str, Any]) -> list[str]:
    return [entry["state"] for entry in action["history"]]
