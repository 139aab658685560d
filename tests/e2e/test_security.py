"""Security of a running stack: API keys on every /v1 route, tenants that never see each other's work,
loopback only, nothing secret or personal in the logs, CORS closed, and rate limits.

One stack of this module's own, with API keys (acme, globex) and the Temporal UI on; the rate-limit
tests add API processes with a low limit on the same Temporal server and worker.
"""

import ipaddress
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from settled.api.page.links import mint_link

from settled.runtime.config import Settings
from settled.runtime.stack import Stack
from tests.e2e.conftest import StackOptions
from tests.helpers import BOOKING, Sandbox, api_client, create, new_id, second_api, wait_for

KEY = "acme-key-0123456789"
OTHER_KEY = "globex-key-0123456789"
ACME = {"Authorization": f"Bearer {KEY}"}
GLOBEX = {"Authorization": f"Bearer {OTHER_KEY}"}
API_KEYS = f"acme:{KEY},globex:{OTHER_KEY}"
EVIL_ORIGIN = "http://evil.example"

# Every /v1 route, with a body it would accept.
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/actions", {"conversation_id": "c-1", "kind": "room_booking", "params": BOOKING}),
    ("GET", "/v1/actions/{op}", None),
    ("POST", "/v1/actions/{op}/authorize", {"by": "caller"}),
    ("POST", "/v1/actions/{op}/amend", {"params": {"room": "Babbage", "day": "Friday"}}),
    ("POST", "/v1/actions/{op}/cancel", {"by": "caller", "reason": "changed my mind"}),
    ("POST", "/v1/actions/{op}/reconcile", None),
    ("POST", "/v1/actions/{op}/presented", {"channel": "voice", "text": "Done.", "completed": True}),
    ("POST", "/v1/conversations/{conv}/events", {"type": "channel_closed", "channel": "voice"}),
    ("GET", "/v1/conversations/{conv}/handoff", None),
    ("GET", "/v1/conversations/{conv}/stream", None),
    ("GET", "/v1/kinds", None),
]
ACTION_ROUTES = [route for route in ROUTES if "{op}" in route[1]]


STACK = StackOptions(env={"SETTLED_API_KEYS": API_KEYS}, ui=True)


@pytest.fixture(scope="module")
def secure(module_stack: Stack) -> Stack:
    return module_stack


@pytest.fixture(scope="module")
def keyed(module_api: httpx.Client) -> httpx.Client:
    """No key of its own: each request brings its own, or none."""
    return module_api


@pytest.fixture(scope="module")
def acme(secure: Stack) -> Iterator[httpx.Client]:
    with api_client(secure, headers=ACME) as client:
        yield client


@pytest.fixture(scope="module")
def globex(secure: Stack) -> Iterator[httpx.Client]:
    with api_client(secure, headers=GLOBEX) as client:
        yield client


@pytest.fixture(scope="module")
def truth(module_sandbox: Sandbox) -> Sandbox:
    return module_sandbox


def _path(template: str, op: str = "op-1", conv: str = "c-1") -> str:
    return template.format(op=op, conv=conv)


def _error_code(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


# -- API keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-key-0123456789",
        f"Bearer {KEY.upper()}",  # keys are compared exactly
        f"Bearer {KEY[:-1]}",  # a prefix of a key is no key
        f"Basic {KEY}",  # only the Bearer scheme
        f"{KEY}",  # no scheme at all
        "Bearer",  # a scheme without a key
        "Bearer sl1.forged.token",  # not a signed link either
    ],
)
@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_v1_route_is_a_401_without_a_valid_key(
    keyed: httpx.Client, method: str, path: str, body: dict[str, Any] | None, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = keyed.request(method, _path(path), json=body, headers=headers)
    assert response.status_code == 401, response.text
    assert _error_code(response) == "unauthorized"


def test_health_and_metrics_need_no_key_and_the_codec_does(keyed: httpx.Client) -> None:
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get("/metrics").status_code == 200
    assert keyed.post("/codec/decode", json={"payloads": []}).status_code == 401


# -- tenants ----------------------------------------------------------------------------------------


@pytest.fixture
def acme_action(acme: httpx.Client) -> dict[str, Any]:
    """An acme booking waiting for the go-ahead: any control from another tenant would change it."""
    conversation = new_id("conv")
    created = create(acme, "room_booking", BOOKING, conversation_id=conversation)
    assert created.status_code == 201, created.text
    opened = acme.post(
        f"/v1/conversations/{conversation}/events", json={"type": "channel_opened", "channel": "voice"}
    )
    assert opened.status_code == 202
    return dict(created.json())


def _owner_view(acme: httpx.Client, action: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    status = acme.get(f"/v1/actions/{action['operation_id']}")
    handoff = acme.get(f"/v1/conversations/{action['conversation_id']}/handoff")
    assert status.status_code == 200 and handoff.status_code == 200
    return status.json(), handoff.json()


@pytest.mark.parametrize(("method", "path", "body"), ACTION_ROUTES)
def test_another_tenants_action_is_a_404_on_every_route_and_stays_as_it_was(
    acme: httpx.Client,
    globex: httpx.Client,
    truth: Sandbox,
    acme_action: dict[str, Any],
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    before = _owner_view(acme, acme_action)
    op = acme_action["operation_id"]
    response = globex.request(method, _path(path, op=op), json=body)
    assert response.status_code == 404, response.text
    assert _error_code(response) == "not_found"
    assert _owner_view(acme, acme_action) == before
    assert truth.requests(f"acme:{op}") == [] and truth.requests(op) == []


def test_another_tenants_conversation_is_an_empty_one_of_ones_own(
    acme: httpx.Client, globex: httpx.Client, truth: Sandbox, acme_action: dict[str, Any]
) -> None:
    """Ids are scoped per tenant: to globex, acme's conversation id names a conversation of globex's
    that has nothing yet — 200 `idle` (docs/reference.md), never a 404 that would tell the id is taken
    elsewhere. What globex records there stays in its own conversation."""
    before = _owner_view(acme, acme_action)
    conversation = acme_action["conversation_id"]
    handoff = globex.get(f"/v1/conversations/{conversation}/handoff")
    assert handoff.status_code == 200
    assert handoff.json()["work"] == "idle" and handoff.json()["actions"] == []
    assert handoff.json()["channels"] == {"voice": "unused", "text": "unused"}  # acme opened voice
    closed = globex.post(
        f"/v1/conversations/{conversation}/events",
        json={"type": "channel_closed", "channel": "voice", "reason": "dropped"},
    )
    assert closed.status_code == 202 and closed.json()["reconciling"] == []
    theirs = globex.get(f"/v1/conversations/{conversation}/handoff").json()
    assert theirs["channels"]["voice"] == "closed" and theirs["actions"] == []
    assert _owner_view(acme, acme_action) == before  # acme's voice channel is still open
    assert before[1]["channels"]["voice"] == "open"
    assert truth.requests(f"acme:{acme_action['operation_id']}") == []


def test_another_tenants_stream_carries_nothing_of_the_owner(
    acme: httpx.Client, globex: httpx.Client, acme_action: dict[str, Any]
) -> None:
    """globex streams acme's conversation id while acme's action changes; globex's own action in that
    id is the barrier: once it arrives, acme's change (made before it) would have too."""
    conversation, op = acme_action["conversation_id"], acme_action["operation_id"]
    events: list[dict[str, Any]] = []
    with globex.stream("GET", f"/v1/conversations/{conversation}/stream") as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
            if line.startswith(": live"):
                break
        assert events == []  # acme's waiting action is not in globex's current state
        amended = acme.post(f"/v1/actions/{op}/amend", json={"params": {"room": "Babbage", "day": "Friday"}})
        assert amended.status_code == 200
        own = create(globex, "room_booking", BOOKING, conversation_id=conversation).json()
        for line in lines:
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1]["operation_id"] == own["operation_id"]:
                    break
    assert [event["operation_id"] for event in events] == [own["operation_id"]]
    assert all(event["params"] == BOOKING for event in events)  # never acme's amended params


def test_the_same_ids_in_two_tenants_are_two_actions(
    acme: httpx.Client, globex: httpx.Client, truth: Sandbox
) -> None:
    op, conversation = new_id(), new_id("conv")
    same = {"operation_id": op, "conversation_id": conversation, "authorized": True, "wait": 10}
    mine = create(acme, "refund", {"order_id": "o-1", "amount": 5, "currency": "EUR"}, **same)
    theirs = create(globex, "refund", {"order_id": "o-2", "amount": 7, "currency": "EUR"}, **same)
    assert mine.status_code == theirs.status_code == 201  # never an operation_conflict
    assert mine.json()["state"] == theirs.json()["state"] == "confirmed"
    assert [r["payload"]["order_id"] for r in truth.records(f"acme:{op}")] == ["o-1"]
    assert [r["payload"]["order_id"] for r in truth.records(f"globex:{op}")] == ["o-2"]


# -- loopback only ----------------------------------------------------------------------------------


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp's address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _listening(inodes: set[str]) -> list[tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(protocol, address, port) of every listening TCP socket and every bound UDP socket."""
    found = []
    for protocol, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        for line in Path(f"/proc/net/{protocol}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] == state:
                host, port = fields[1].split(":")
                found.append((protocol, _address(host), int(port, 16)))
    return found


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def test_every_part_listens_on_loopback_only(secure: Stack) -> None:
    sockets = {}
    for name, child in secure.children.items():
        inodes = set().union(*(_socket_inodes(pid) for pid in _descendants(child.popen.pid)))
        sockets[name] = _listening(inodes)
    everything = [entry for entries in sockets.values() for entry in entries]
    assert everything and all(_is_loopback(address) for _, address, _ in everything), sockets
    ports = {port for _, _, port in everything}
    wanted = {secure.ports.api, secure.ports.temporal, secure.ports.ui, secure.ports.sandbox}
    assert wanted | {secure.ports.worker_metrics} <= ports, sockets  # it did see the real sockets


# -- logs -------------------------------------------------------------------------------------------


def test_no_secret_or_personal_data_reaches_any_log(
    keyed: httpx.Client, acme: httpx.Client, secure: Stack
) -> None:
    marker = f"Marker-{new_id('pii')}"  # a name, a room, a reason: what a caller says
    conversation = new_id("conv")
    settings = Settings(api_keys={KEY: "acme", OTHER_KEY: "globex"})
    token = mint_link(settings, conversation, "acme", ttl_s=3600).split("?t=", 1)[1]
    link = {"Authorization": f"Bearer {token}"}
    booking = {"room": marker, "day": marker}
    op = create(acme, "room_booking", booking, conversation_id=conversation, authorized_by=marker)
    op = op.json()["operation_id"]
    assert keyed.get(f"/c/{conversation}", params={"t": token}).status_code == 200
    authorized = keyed.post(
        f"/v1/actions/{op}/authorize", json={"by": marker}, params={"wait": 10}, headers=link
    )
    assert authorized.json()["state"] == "confirmed"
    presented = {"channel": "text", "text": marker, "completed": True}
    assert keyed.post(f"/v1/actions/{op}/presented", json=presented, headers=link).status_code == 200
    event = {"type": "channel_closed", "channel": "voice", "reason": marker}
    assert keyed.post(f"/v1/conversations/{conversation}/events", json=event, headers=link).status_code == 202
    cancelled = acme.post(
        f"/v1/actions/{op}/cancel", json={"by": marker, "reason": marker}, params={"wait": 10}
    )
    assert cancelled.json()["state"] == "cancelled"  # compensated: a reversal went to the business too
    with keyed.stream("GET", f"/v1/conversations/{conversation}/stream", params={"t": token}) as stream:
        assert stream.status_code == 200
        next(line for line in stream.iter_lines() if line.startswith("data:"))
    # Refused calls carry them too: a wrong key, a bad param, an id in the path, a link elsewhere.
    assert keyed.get(f"/v1/actions/{op}", headers={"Authorization": f"Bearer {marker}"}).status_code == 401
    bad = {"conversation_id": conversation, "kind": "room_booking", "params": {"room": marker}}
    assert acme.post("/v1/actions", json=bad).status_code == 422
    assert acme.get(f"/v1/actions/{marker}%0A").status_code == 422
    assert keyed.post("/v1/actions", json=bad, headers=link).status_code == 401
    barrier = new_id("barrier")  # the last request: once its line is in the log, all lines above are
    assert acme.get(f"/v1/actions/{barrier}").status_code == 404
    logs = secure.data_dir / "logs"
    wait_for(lambda: barrier in (logs / "api.log").read_text(), what="the API's log line of the last request")

    files = sorted(path for path in logs.rglob("*") if path.is_file())
    assert {path.name for path in files} >= {"api.log", "worker.log", "temporal.log", "sandbox.log"}
    secrets = {
        "personal data": marker,
        "acme's key": KEY,
        "globex's key": OTHER_KEY,
        "the link token": token,
        "the link signature": token.rsplit(".", 1)[1],
    }
    for path in files:
        text = path.read_text(errors="replace")
        for what, secret in secrets.items():
            assert secret not in text, f"{what} in {path.name}"
    assert op in (logs / "api.log").read_text()  # the ids are logged: the right logs were read


# -- CORS -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", [EVIL_ORIGIN, "null", "UI"])
@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_cors_is_closed_on_every_v1_route(
    keyed: httpx.Client, secure: Stack, method: str, path: str, body: dict[str, Any] | None, origin: str
) -> None:
    """Even the Temporal UI's origin, which may call /codec, gets nothing on /v1."""
    origin = secure.ui_url if origin == "UI" else origin
    preflight = keyed.options(
        _path(path),
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert "access-control-allow-origin" not in preflight.headers, preflight.headers
    assert preflight.status_code >= 400  # no route answers OPTIONS
    if "stream" in path:
        return  # a stream never ends; the preflight is what a browser would stop at
    actual = keyed.request(method, _path(path), json=body, headers={**ACME, "Origin": origin})
    assert not any(name.startswith("access-control-") for name in actual.headers), actual.headers


def test_the_codec_is_open_to_the_ui_origin_only(keyed: httpx.Client, secure: Stack) -> None:
    """The control for the test above: where CORS is open, the header is there to see."""
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    ui = keyed.options("/codec/decode", headers={"Origin": secure.ui_url, **ask})
    assert ui.headers.get("access-control-allow-origin") == secure.ui_url
    evil = keyed.options("/codec/decode", headers={"Origin": EVIL_ORIGIN, **ask})
    assert "access-control-allow-origin" not in evil.headers


# -- rate limits ------------------------------------------------------------------------------------

BURST = 5
# One token a minute: within a test, nothing refills, so "the sixth is refused" is exact, not timed.
LIMIT = f"1/min,burst={BURST}"


@pytest.fixture
def limited(secure: Stack, tmp_path: Path) -> Iterator[str]:
    """A keyed API with a low limit (fresh buckets for each test)."""
    api = second_api(secure, tmp_path, SETTLED_API_KEYS=API_KEYS, SETTLED_RATE_LIMIT=LIMIT)
    yield api.api_url
    api.stop()


@pytest.fixture
def limited_open(secure: Stack, tmp_path: Path) -> Iterator[str]:
    """An API without keys with a low limit: the bucket is the client's address."""
    api = second_api(secure, tmp_path, SETTLED_RATE_LIMIT=LIMIT)
    yield api.api_url
    api.stop()


def _assert_rate_limited(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert _error_code(response) == "rate_limited"
    assert 1 <= int(response.headers["retry-after"]) <= 60


def test_a_tenant_over_its_limit_gets_429_and_other_tenants_do_not(
    limited: str, acme: httpx.Client, truth: Sandbox
) -> None:
    with httpx.Client(base_url=limited, timeout=40, headers=ACME) as api:
        codes = [api.get(f"/v1/actions/{new_id()}").status_code for _ in range(BURST)]
        assert codes == [404] * BURST  # answered, each taking a token
        op = new_id()
        _assert_rate_limited(create(api, "room_booking", BOOKING, operation_id=op, authorized=True))
        # Refused before anything: no action (asked through the unlimited API), no request sent.
        assert acme.get(f"/v1/actions/{op}").status_code == 404
        assert truth.requests(f"acme:{op}") == []
        assert api.get(f"/v1/actions/{op}", headers=GLOBEX).status_code == 404  # globex's own bucket
        for _ in range(2 * BURST):  # probes and scrapers are never throttled
            assert api.get("/healthz").status_code == 200
            assert api.get("/metrics").status_code == 200
        assert 'status="429"' in api.get("/metrics").text  # throttling shows in the metrics
        _assert_rate_limited(api.get(f"/v1/actions/{op}"))


def test_callers_without_a_valid_key_share_their_address_bucket(limited: str) -> None:
    """Guessing keys is throttled per address, and does not use up a real tenant's bucket."""
    with httpx.Client(base_url=limited, timeout=40) as api:
        wrong = {"Authorization": "Bearer guess-0123456789"}
        assert [api.get("/v1/actions/op-1", headers=wrong).status_code for _ in range(BURST)] == [401] * BURST
        _assert_rate_limited(api.get("/v1/actions/op-1", headers=wrong))
        _assert_rate_limited(api.get("/v1/actions/op-1"))  # no key: the same address
        assert api.get("/v1/actions/op-1", headers=ACME).status_code == 404


def test_without_api_keys_each_client_address_has_its_own_bucket(limited_open: str) -> None:
    with httpx.Client(base_url=limited_open, timeout=40) as api:
        assert [api.get("/v1/actions/op-1").status_code for _ in range(BURST)] == [404] * BURST
        _assert_rate_limited(api.get("/v1/conversations/c-1/handoff"))
    # Another loopback address of this machine is another client (Linux routes all of 127/8 to lo).
    other = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(base_url=limited_open, timeout=40, transport=other) as api:
        assert api.get("/v1/actions/op-1").status_code == 404
