"""Bad input is a clear 4xx in the contract's error shape, and a refused call records nothing: no
workflow (the id answers 404, `settled list` does not show it), no request to the business service,
no change to an existing record."""

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from settled.api.strict import is_identifier

from settled.runtime.stack import Stack
from tests.helpers import BOOKING, REFUND, Sandbox, create, new_id, status, wait_for

MAX_BODY = 64 * 1024  # the stack's SETTLED_MAX_BODY_BYTES (the default)
JSON = {"content-type": "application/json"}

# Ids outside the API's charset, as they would be sent in a JSON body.
BAD_IDS = [
    "op-é",  # non-ASCII letter
    "op-\u202e",  # right-to-left override
    "op\u0000x",  # NUL
    "op\nx",  # newline (log injection)
    "op-x\n",  # trailing newline: a `$` in a pattern alone would let it through
    "op x",  # space
    "",  # empty
    "x" * 129,  # too long
    "../../etc/passwd",  # traversal
    "..%2F..%2Fv1",  # encoded traversal
    "a/b",  # a slash would change the route of every later call
]
# The same in a URL path, percent-encoded: each must be a 422 naming the id.
BAD_PATH_IDS = ["op-%C3%A9", "op-%E2%80%AE", "op%00x", "op%0Ax", "op%20x", "x" * 129, "%F0%9F%92%A5"]
# Encoded slashes and dot segments: no route matches, a 404 that reaches nothing.
TRAVERSAL_PATH_IDS = ["..%2F..", "a%2Fb", "..%2F..%2Fconversations%2Fc-1", "x%2F..%2F..%2F..%2Fhealthz"]

ACTION_ROUTES = [
    ("GET", "/v1/actions/{id}", None),
    ("POST", "/v1/actions/{id}/authorize", {}),
    ("POST", "/v1/actions/{id}/amend", {"params": BOOKING}),
    ("POST", "/v1/actions/{id}/cancel", {}),
    ("POST", "/v1/actions/{id}/reconcile", None),
    ("POST", "/v1/actions/{id}/presented", {"channel": "voice", "text": "hi", "completed": True}),
]
CONVERSATION_ROUTES = [
    ("POST", "/v1/conversations/{id}/events", {"type": "channel_opened", "channel": "text"}),
    ("GET", "/v1/conversations/{id}/handoff", None),
    ("GET", "/v1/conversations/{id}/stream", None),
]


def _error(response: httpx.Response, status_code: int, code: str, names: str = "") -> str:
    assert response.status_code == status_code, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert names in body["error"]["message"], body
    assert "Traceback" not in response.text
    return str(body["error"]["message"])


def _nothing_recorded(api: httpx.Client, sandbox: Sandbox, operation_id: str, conversation_id: str) -> None:
    """No workflow for the id, no request that reached the business service, no action in the
    conversation (whose handoff is the `idle` of a conversation that has nothing). An id outside the
    charset cannot be asked for in a path; the other id and the sandbox still tell."""
    if is_identifier(operation_id):
        assert api.get(f"/v1/actions/{operation_id}").json()["error"]["code"] == "not_found"
    assert sandbox.requests(operation_id) == [] and sandbox.records(operation_id) == []
    if is_identifier(conversation_id):
        handoff = api.get(f"/v1/conversations/{conversation_id}/handoff").json()
        assert handoff["work"] == "idle" and handoff["actions"] == [], handoff


def _body(op: str, conversation: str, /, **changes: Any) -> dict[str, Any]:
    """A valid, authorized refund: if the API wrongly accepted it, it would reach the sandbox at once."""
    body = {
        "operation_id": op,
        "conversation_id": conversation,
        "kind": "refund",
        "params": REFUND,
        "authorized": True,
    }
    return {**body, **changes}


# -- the body of POST /v1/actions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"operation_id": "@OP", "conversation_id": "@CONV", ', "not valid JSON"),  # cut short
        (b'{"operation_id": "@OP", "conversation_id": "@CONV"} trailing', "not valid JSON"),
        (b"{'operation_id': '@OP'}", "not valid JSON"),  # single quotes
        (b'{"operation_id": "@OP", "conversation_id": "@CONV", "kind": "refund", "authorized": true, '
         b'"params": {"order_id": "o-1", "amount": NaN, "currency": "EUR"}}', "not valid JSON"),
        (b'{"operation_id": "@OP", "conversation_id": "@CONV", "kind": "refund", "authorized": true, '
         b'"params": {"order_id": "o-1", "amount": Infinity, "currency": "EUR"}}', "not valid JSON"),
        (b'{"operation_id": "@OP", "conversation_id": "\xff\xfe", "kind": "refund"}', "not valid JSON"),
    ],
)  # fmt: skip
def test_malformed_json_is_a_400_and_records_nothing(
    api: httpx.Client, sandbox: Sandbox, raw: bytes, message: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    content = raw.replace(b"@OP", op.encode()).replace(b"@CONV", conversation.encode())
    _error(api.post("/v1/actions", content=content, headers=JSON), 400, "invalid_request", message)
    _nothing_recorded(api, sandbox, op, conversation)


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"conversation_id": 5}, "conversation_id"),
        ({"kind": ["refund"]}, "kind"),
        ({"params": "order o-1"}, "params"),
        ({"params": [REFUND]}, "params"),
        ({"authorized": "yes"}, "authorized"),  # never a go-ahead by coercion
        ({"authorized": 1}, "authorized"),
        ({"authorized_by": {"name": "caller"}}, "authorized_by"),
        ({"colour": "blue"}, "colour"),  # an unknown field is refused, not ignored
    ],
)
def test_wrong_types_are_a_422_naming_the_field(
    api: httpx.Client, sandbox: Sandbox, changes: dict[str, Any], names: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    body = _body(op, conversation, **changes)
    _error(api.post("/v1/actions", json=body), 422, "invalid_request", names)
    _nothing_recorded(api, sandbox, op, conversation)


@pytest.mark.parametrize("bad", BAD_IDS, ids=range(len(BAD_IDS)))
@pytest.mark.parametrize("field", ["operation_id", "conversation_id"])
def test_ids_outside_the_charset_are_a_422_naming_the_id(
    api: httpx.Client, sandbox: Sandbox, field: str, bad: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    body = _body(op, conversation, **{field: bad})
    _error(api.post("/v1/actions", json=body), 422, "invalid_request", field)
    _nothing_recorded(api, sandbox, body["operation_id"], body["conversation_id"])


@pytest.mark.parametrize(
    ("changes", "code", "names"),
    [
        ({"kind": "teleport"}, "unknown_kind", "teleport"),
        ({"kind": "Refund"}, "unknown_kind", "Refund"),  # kinds are case-sensitive
        ({"kind": ""}, "invalid_request", "kind"),
        ({"kind": "x" * 129}, "invalid_request", "kind"),
        ({"params": {"order_id": "o-1", "currency": "EUR"}}, "invalid_params", "params.amount"),
        ({"params": {**REFUND, "amount": "25.50"}}, "invalid_params", "params.amount"),
        ({"params": {**REFUND, "amount": 0}}, "invalid_params", "params.amount"),
        ({"params": {**REFUND, "currency": "euro"}}, "invalid_params", "params.currency"),
        ({"params": {**REFUND, "note": "extra"}}, "invalid_params", "params.note"),
        ({"kind": "room_booking", "params": {"room": "", "day": "Friday"}}, "invalid_params", "params.room"),
    ],
)
def test_unknown_kinds_and_params_that_fail_the_schema_are_a_422(
    api: httpx.Client, sandbox: Sandbox, changes: dict[str, Any], code: str, names: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    _error(api.post("/v1/actions", json=_body(op, conversation, **changes)), 422, code, names)
    _nothing_recorded(api, sandbox, op, conversation)


# JSON can carry a lone surrogate (`\\ud800`), which is no Unicode text: written raw, since no JSON
# writer that checks its text would send one. `@OP` and `@CONV` are filled in.
LONE = "\\ud800"
_REFUND_RAW = '"order_id": "o-1", "amount": 25.5, "currency": "EUR"'


def _raw_create(params: str, **fields: str) -> str:
    body = {"operation_id": '"@OP"', "conversation_id": '"@CONV"', "kind": '"refund"', "authorized": "true"}
    body.update(fields)
    return (
        "{" + ", ".join(f'"{name}": {value}' for name, value in body.items()) + f', "params": {{{params}}}}}'
    )


@pytest.mark.parametrize(
    ("raw", "code", "names"),
    [
        (_raw_create(f'{_REFUND_RAW}, "note": "{LONE}"'), "invalid_params", "params.note"),
        (_raw_create(f'"order_id": "o-{LONE}", "amount": 1, "currency": "EUR"'), "invalid_params",
         "params.order_id"),
        (_raw_create('"order_id": "o-\\udc00x", "amount": 1, "currency": "EUR"'), "invalid_params",
         "params.order_id"),  # a lone low surrogate
        (_raw_create(f'{_REFUND_RAW}, "{LONE}": 1'), "invalid_params", "params.\\ud800"),  # in a key
        (_raw_create(f'{_REFUND_RAW}, "a": {{"b": [1, {{"c{LONE}": 2}}]}}'), "invalid_params",
         "params.a.b.1"),
        (_raw_create(f'{_REFUND_RAW}, "a": [[{{"b": "{LONE}{LONE}"}}]]'), "invalid_params", "params.a.0.0.b"),
        (_raw_create(_REFUND_RAW, authorized_by=f'"caller {LONE}"'), "invalid_request", "authorized_by"),
        (_raw_create(_REFUND_RAW, kind=f'"refund{LONE}"'), "invalid_request", "kind"),
        (_raw_create(_REFUND_RAW, conversation_id=f'"c-{LONE}"'), "invalid_request", "conversation_id"),
        (_raw_create(_REFUND_RAW, operation_id=f'"op-{LONE}"'), "invalid_request", "operation_id"),
        (_raw_create(_REFUND_RAW, **{LONE: "1"}), "invalid_request", ""),
    ],
)  # fmt: skip
def test_text_that_is_not_unicode_is_a_422_naming_the_field_and_records_nothing(
    api: httpx.Client, sandbox: Sandbox, raw: str, code: str, names: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    content = raw.replace("@OP", op).replace("@CONV", conversation).encode()
    _error(api.post("/v1/actions", content=content, headers=JSON), 422, code, names)
    _nothing_recorded(api, sandbox, op, conversation)


def test_a_surrogate_pair_is_text(api: httpx.Client) -> None:
    """The escapes of a character beyond the first plane, in a pair, are that character: accepted."""
    op, conversation = new_id(), new_id("conv")
    raw = _raw_create('"order_id": "o-\\ud83d\\ude00", "amount": 1, "currency": "EUR"', authorized="false")
    content = raw.replace("@OP", op).replace("@CONV", conversation).encode()
    created = api.post("/v1/actions", content=content, headers=JSON)
    assert created.status_code == 201 and created.json()["params"]["order_id"] == "o-\U0001f600", created.text


@pytest.mark.parametrize(
    ("control", "raw", "code", "names"),
    [
        ("amend", f'{{"params": {{"room": "Ada", "day": "Fri{LONE}"}}}}', "invalid_params", "params.day"),
        ("amend", f'{{"params": {{"room": "Ada", "{LONE}": "Fri"}}}}', "invalid_params", "params.\\ud800"),
        ("authorize", f'{{"by": "{LONE}"}}', "invalid_request", "by"),
        ("cancel", f'{{"by": "caller", "reason": "{LONE}"}}', "invalid_request", "reason"),
        ("cancel", f'{{"by": "{LONE}"}}', "invalid_request", "by"),
        ("presented", f'{{"channel": "voice", "text": "{LONE}", "completed": true}}', "invalid_request",
         "text"),
        ("presented", f'{{"channel": "voice{LONE}", "text": "hi", "completed": true}}', "invalid_request",
         "channel"),
    ],
)  # fmt: skip
def test_a_control_with_text_that_is_not_unicode_leaves_the_record_as_it_was(
    api: httpx.Client, sandbox: Sandbox, control: str, raw: str, code: str, names: str
) -> None:
    op = create(api, "room_booking", BOOKING).json()["operation_id"]
    before = status(api, op)
    response = api.post(f"/v1/actions/{op}/{control}", content=raw.encode(), headers=JSON)
    _error(response, 422, code, names)
    assert status(api, op) == before
    assert sandbox.requests(op) == []


@pytest.mark.parametrize("wait", ["-1", "30.5", "31", "3600", "soon", "nan", "inf", "-inf"])
def test_wait_out_of_range_is_a_422_on_every_route_that_waits(
    api: httpx.Client, sandbox: Sandbox, wait: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    response = api.post("/v1/actions", json=_body(op, conversation), params={"wait": wait})
    _error(response, 422, "invalid_request", "wait")
    _nothing_recorded(api, sandbox, op, conversation)
    waiting = create(api, "room_booking", BOOKING).json()
    before = status(api, waiting["operation_id"])
    for control in ("authorize", "cancel", "reconcile"):
        path = f"/v1/actions/{waiting['operation_id']}/{control}"
        _error(api.post(path, json={}, params={"wait": wait}), 422, "invalid_request", "wait")
    assert status(api, waiting["operation_id"]) == before  # not authorized, not cancelled
    assert sandbox.requests(waiting["operation_id"]) == []


# -- body size ---------------------------------------------------------------------------------------


def _padded(op: str, conversation: str, size: int) -> bytes:
    """A create body of exactly `size` bytes (its params fail the schema: an extra field)."""
    body = _body(op, conversation, params={**REFUND, "note": ""})
    empty = len(json.dumps(body).encode())
    body["params"]["note"] = "x" * (size - empty)
    encoded = json.dumps(body).encode()
    assert len(encoded) == size
    return encoded


def _chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_a_body_at_the_limit_is_read_and_one_byte_more_is_a_413(api: httpx.Client, sandbox: Sandbox) -> None:
    op, conversation = new_id(), new_id("conv")
    at_limit = api.post("/v1/actions", content=_padded(op, conversation, MAX_BODY), headers=JSON)
    _error(at_limit, 422, "invalid_params", "params.note")  # read and validated: the size was fine
    over = api.post("/v1/actions", content=_padded(op, conversation, MAX_BODY + 1), headers=JSON)
    _error(over, 413, "payload_too_large", str(MAX_BODY))
    _nothing_recorded(api, sandbox, op, conversation)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_huge_body_is_a_413_with_or_without_a_content_length(
    api: httpx.Client, sandbox: Sandbox, framing: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    # A valid request but for its size: if the limit slipped, it would be created and dispatched.
    huge = json.dumps(_body(op, conversation, kind="refund_nodedup", params={**REFUND, "n": "x" * 500_000}))
    data = huge.encode()
    # A generator has no length: httpx sends it with Transfer-Encoding: chunked.
    content = data if framing == "content-length" else _chunks(data)
    response = api.post("/v1/actions", content=content, headers=JSON)
    _error(response, 413, "payload_too_large")
    _nothing_recorded(api, sandbox, op, conversation)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [route for route in ACTION_ROUTES + CONVERSATION_ROUTES if route[2] is not None],
)
def test_a_huge_chunked_body_is_a_413_on_every_route_that_takes_one(
    api: httpx.Client, method: str, path: str, body: dict[str, Any] | None
) -> None:
    waiting = create(api, "room_booking", BOOKING).json()
    before = status(api, waiting["operation_id"])
    target = waiting["operation_id"] if "actions" in path else waiting["conversation_id"]
    data = json.dumps({**(body or {}), "pad": "x" * (2 * MAX_BODY)}).encode()
    response = api.request(method, path.format(id=target), content=_chunks(data), headers=JSON)
    _error(response, 413, "payload_too_large")
    assert status(api, waiting["operation_id"]) == before


# -- ids in the path ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_PATH_IDS, ids=range(len(BAD_PATH_IDS)))
@pytest.mark.parametrize(("method", "path", "body"), ACTION_ROUTES + CONVERSATION_ROUTES)
def test_a_path_id_outside_the_charset_is_a_422_naming_it(
    api: httpx.Client, method: str, path: str, body: dict[str, Any] | None, bad: str
) -> None:
    names = "operation_id" if path.startswith("/v1/actions") else "conversation_id"
    response = api.request(method, path.format(id=bad), json=body)
    _error(response, 422, "invalid_request", names)


@pytest.mark.parametrize("bad", TRAVERSAL_PATH_IDS)
@pytest.mark.parametrize(("method", "path", "body"), ACTION_ROUTES + CONVERSATION_ROUTES)
def test_encoded_slashes_in_a_path_id_reach_no_route(
    api: httpx.Client, method: str, path: str, body: dict[str, Any] | None, bad: str
) -> None:
    response = api.request(method, path.format(id=bad), json=body)
    _error(response, 404, "not_found")


@pytest.mark.parametrize("credential", ["none", "api key", "page link"])
def test_a_malformed_path_id_never_reaches_temporal(credential: str) -> None:
    """Against an app whose Temporal is unreachable: a good id is a 503 (it tried), a bad one a 422
    (it did not), on every route — also with a page link, whose action routes look the action up."""
    from settled.api.app import create_app
    from settled.api.page.links import mint_link

    from settled.runtime.config import Settings

    key = "acme-key-0123456789"
    env = {"SETTLED_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    if credential != "none":
        env["SETTLED_API_KEYS"] = f"acme:{key}"
    settings = Settings.from_env(env)
    bearer = {"none": "", "api key": key, "page link": ""}[credential]
    if credential == "page link":  # for the conversation "op-1" that the good ids below name
        bearer = mint_link(settings, "op-1", "acme").split("?t=", 1)[1]
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    with TestClient(create_app(settings)) as client:
        for method, path, body in ACTION_ROUTES + CONVERSATION_ROUTES:
            names = "operation_id" if path.startswith("/v1/actions") else "conversation_id"
            bad = client.request(method, path.format(id="op%0Ax"), json=body, headers=headers)
            assert bad.status_code == 422 and names in bad.json()["error"]["message"], (path, bad.text)
            good = client.request(method, path.format(id="op-1"), json=body, headers=headers)
            # A page link does not open amend: refused before Temporal too, as it should be.
            expected = (
                "unauthorized" if credential == "page link" and "amend" in path else "temporal_unavailable"
            )
            assert good.json()["error"]["code"] == expected, (path, good.text)


# -- controls and events on existing records ------------------------------------------------------------


@pytest.mark.parametrize(
    ("control", "body", "status_code", "code", "names"),
    [
        ("amend", {"params": {"room": "Ada"}}, 422, "invalid_params", "params.day"),
        ("amend", {"params": {**BOOKING, "floor": 3}}, 422, "invalid_params", "params.floor"),
        ("amend", {"params": "Ada on Friday"}, 422, "invalid_request", "params"),
        ("amend", {}, 422, "invalid_request", "params"),
        ("authorize", {"by": 5}, 422, "invalid_request", "by"),
        ("authorize", {"by": "caller", "really": True}, 422, "invalid_request", "really"),
        ("cancel", {"reason": "x" * 501}, 422, "invalid_request", "reason"),
        ("presented", {"channel": "fax", "text": "hi", "completed": True}, 422, "invalid_request", "channel"),
        ("presented", {"channel": "voice", "text": "hi", "completed": "yes"}, 422, "invalid_request",
         "completed"),
        ("presented", {"channel": "voice", "text": "x" * 4001, "completed": True}, 422, "invalid_request",
         "text"),
        ("presented", {"channel": "voice", "text": "hi", "completed": True, "for_state": "done"}, 422,
         "invalid_request", "for_state"),
    ],
)  # fmt: skip
def test_a_refused_control_leaves_the_record_as_it_was(
    api: httpx.Client,
    sandbox: Sandbox,
    control: str,
    body: dict[str, Any],
    status_code: int,
    code: str,
    names: str,
) -> None:
    op = create(api, "room_booking", BOOKING).json()["operation_id"]
    before = status(api, op)
    _error(api.post(f"/v1/actions/{op}/{control}", json=body), status_code, code, names)
    assert status(api, op) == before
    assert sandbox.requests(op) == []


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"type": "hung_up", "channel": "voice"}, "type"),
        ({"type": "channel_closed", "channel": "fax"}, "channel"),
        ({"type": "channel_closed", "channel": "voice", "reason": "x" * 201}, "reason"),
        ({"type": "channel_closed", "channel": "voice", "by": "caller"}, "by"),
        ({"channel": "voice"}, "type"),
    ],
)
def test_a_refused_event_records_nothing(api: httpx.Client, body: dict[str, Any], names: str) -> None:
    conversation = new_id("conv")
    _error(api.post(f"/v1/conversations/{conversation}/events", json=body), 422, "invalid_request", names)
    _no_channel_event(api, conversation)


def test_an_event_with_text_that_is_not_unicode_records_nothing(api: httpx.Client) -> None:
    conversation = new_id("conv")
    raw = f'{{"type": "channel_closed", "channel": "voice", "reason": "hung up {LONE}"}}'.encode()
    response = api.post(f"/v1/conversations/{conversation}/events", content=raw, headers=JSON)
    _error(response, 422, "invalid_request", "reason")
    _no_channel_event(api, conversation)


def _no_channel_event(api: httpx.Client, conversation: str) -> None:
    handoff = api.get(f"/v1/conversations/{conversation}/handoff").json()
    assert handoff["work"] == "idle" and handoff["channels"] == {"voice": "unused", "text": "unused"}


# -- nothing in Temporal's visibility either ---------------------------------------------------------


def test_refused_creates_leave_no_workflow_in_settled_list(
    api: httpx.Client, sandbox: Sandbox, stack: Stack
) -> None:
    conversation = new_id("conv")
    refused = [
        _body(new_id(), conversation, kind="teleport"),
        _body(new_id(), conversation, params={**REFUND, "amount": -1}),
        _body(new_id(), conversation, authorized="yes"),
        _body("op-é", conversation),
    ]
    for body in refused:
        assert api.post("/v1/actions", json=body).status_code == 422
    assert api.post("/v1/actions", json=refused[0], params={"wait": 99}).status_code == 422
    # A witness created after them: once visibility shows it, it would show the refused ones too.
    witness = create(api, "room_booking", BOOKING, conversation_id=conversation).json()["operation_id"]

    def listed() -> list[dict[str, Any]] | None:
        run = subprocess.run(
            [sys.executable, "-m", "settled", "list", "--conversation", conversation, "--json"],
            env=stack.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        rows: list[dict[str, Any]] = json.loads(run.stdout)
        return rows or None

    rows = wait_for(listed, what="the witness in visibility")
    assert [row["operation_id"] for row in rows] == [witness]
    for body in refused:
        assert sandbox.requests(body["operation_id"]) == []


@pytest.mark.parametrize("value", ["yes", "no", "1", "0", "True", "on", ""])
def test_reports_heard_is_true_or_false_else_a_422_naming_it(
    api: httpx.Client, sandbox: Sandbox, value: str
) -> None:
    op, conversation = new_id(), new_id("conv")
    response = api.post("/v1/actions", json=_body(op, conversation), params={"reports_heard": value})
    _error(response, 422, "invalid_request", "reports_heard")
    _nothing_recorded(api, sandbox, op, conversation)
