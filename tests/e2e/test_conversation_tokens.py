"""Conversation tokens on a real stack with API keys: a browser agent's bearer credential that opens
the routes of one conversation (create there, its actions' controls, its events, handoff and stream,
the kinds) until it expires, and nothing else; rotating the tenant's key ends it; neither the key
nor the token is ever echoed or logged.

The session's stack, with a second API process of its own on the same Temporal server, worker and
sandbox, keyed for acme and globex (and a third, with acme's key rotated).
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from settled.api.page.links import mint_link

from settled.runtime.config import Settings, parse_api_keys
from settled.runtime.stack import Stack
from settled.tokens import CONVERSATION_TOKEN, mint_conversation_token, sign
from tests.helpers import BOOKING, REFUND, Sandbox, new_id, second_api, wait_for

KEY = "acme-key-tokens-0123456789"
GLOBEX_KEY = "globex-key-tokens-0123456789"
ROTATED_KEY = "acme-key-rotated-9876543210"
KEYS = f"acme:{KEY},globex:{GLOBEX_KEY}"


@pytest.fixture(scope="module")
def keyed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    api = second_api(stack, tmp_path_factory.mktemp("tokens-api"), SETTLED_API_KEYS=KEYS)
    yield api
    api.stop()


class Answers:
    """Every answer the API gave in a test, to prove the key and the token never come back."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def hook(self, response: httpx.Response) -> None:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            self.texts.append(str(response.headers))  # a stream never ends: its events are ActionStatus
            return
        response.read()
        self.texts.append(f"{response.headers}\n{response.text}")


@pytest.fixture
def answers() -> Answers:
    return Answers()


@pytest.fixture
def api(keyed: Stack, answers: Answers) -> Iterator[httpx.Client]:
    """No credential of its own: each request brings one."""
    hooks = {"response": [answers.hook]}
    with httpx.Client(base_url=keyed.api_url, timeout=40, event_hooks=hooks) as client:
        yield client


def bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


ACME = bearer(KEY)


def _booking(api: httpx.Client, conversation: str, headers: dict[str, str] = ACME) -> str:
    body = {
        "conversation_id": conversation,
        "kind": "room_booking",
        "params": BOOKING,
        "operation_id": new_id(),
    }
    created = api.post("/v1/actions", json=body, headers=headers)
    assert created.status_code == 201, created.text
    return str(created.json()["operation_id"])


def _error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text


def _never_echoed(answers: Answers, *secrets: str) -> None:
    assert answers.texts
    for text in answers.texts:
        for secret in secrets:
            assert secret not in text


def test_a_token_opens_every_route_of_its_conversation(
    api: httpx.Client, sandbox: Sandbox, answers: Answers
) -> None:
    conversation = new_id("conv")
    token = mint_conversation_token(KEY, "acme", conversation, ttl_s=600)
    auth = bearer(token)
    assert "refund" in [kind["name"] for kind in api.get("/v1/kinds", headers=auth).json()["kinds"]]

    op = new_id()
    body = {
        "conversation_id": conversation,
        "kind": "refund",
        "params": {**REFUND, "order_id": new_id("order")},
        "operation_id": op,
        "authorized": True,
    }
    created = api.post("/v1/actions", json=body, params={"wait": 20}, headers=auth)
    assert created.status_code == 201 and created.json()["state"] == "confirmed", created.text
    assert api.post("/v1/actions", json=body, headers=auth).status_code == 200  # a repeat
    assert len(sandbox.records(f"acme:{op}", "refunds")) == 1
    assert api.get(f"/v1/actions/{op}", headers=auth).json()["state"] == "confirmed"
    assert api.post(f"/v1/actions/{op}/reconcile", headers=auth).status_code == 200
    shown = {"channel": "text", "text": created.json()["say"], "completed": True, "for_state": "confirmed"}
    assert api.post(f"/v1/actions/{op}/presented", json=shown, headers=auth).json()["presented"]["completed"]

    booking = _booking(api, conversation, auth)
    go = api.post(
        f"/v1/actions/{booking}/authorize", json={"by": "caller"}, params={"wait": 20}, headers=auth
    )
    assert go.json()["state"] == "confirmed", go.text
    later = _booking(api, conversation, auth)
    stop = api.post(f"/v1/actions/{later}/cancel", json={"by": "caller"}, params={"wait": 20}, headers=auth)
    assert stop.json()["state"] == "cancelled", stop.text

    base = f"/v1/conversations/{conversation}"
    event = {"type": "channel_opened", "channel": "text"}
    assert api.post(f"{base}/events", json=event, headers=auth).status_code == 202
    handoff = api.get(f"{base}/handoff", headers=auth).json()
    assert [action["operation_id"] for action in handoff["actions"]] == [op, booking, later]
    # The stream, with the token in its header and (EventSource cannot set one) as ?t=.
    for options in ({"headers": auth}, {"params": {"t": token}}):
        with api.stream("GET", f"{base}/stream", **options) as stream:
            assert stream.status_code == 200
            assert next(line for line in stream.iter_lines() if line.startswith("data:"))
    # What the key sees is what the token made: the tenant's own actions in that conversation.
    assert api.get(f"{base}/handoff", headers=ACME).json()["actions"] == handoff["actions"]
    _never_echoed(answers, KEY, token)


def test_another_conversation_is_refused_and_nothing_is_made(
    api: httpx.Client, sandbox: Sandbox, answers: Answers
) -> None:
    conversation, elsewhere = new_id("conv"), new_id("conv")
    token = mint_conversation_token(KEY, "acme", conversation, ttl_s=600)
    auth = bearer(token)
    op = new_id()
    body = {"conversation_id": elsewhere, "kind": "refund", "params": REFUND}
    refused = api.post("/v1/actions", json={**body, "operation_id": op, "authorized": True}, headers=auth)
    _error(refused, 403, "forbidden")
    assert api.get(f"/v1/actions/{op}", headers=ACME).status_code == 404
    assert sandbox.requests(f"acme:{op}") == []
    for method, path in [("POST", "events"), ("GET", "handoff"), ("GET", "stream")]:
        event = {"type": "channel_closed", "channel": "voice"} if method == "POST" else None
        response = api.request(method, f"/v1/conversations/{elsewhere}/{path}", json=event, headers=auth)
        _error(response, 403, "forbidden")
    assert (
        api.get(f"/v1/conversations/{elsewhere}/handoff", headers=ACME).json()["channels"]["voice"]
        == "unused"
    )
    _never_echoed(answers, KEY, token)


ACTION_ROUTES = [
    ("GET", "", None),
    ("POST", "/authorize", {"by": "caller"}),
    ("POST", "/cancel", {"by": "caller"}),
    ("POST", "/reconcile", None),
    ("POST", "/presented", {"channel": "text", "text": "Done.", "completed": True}),
]


@pytest.mark.parametrize("owner", ["another conversation", "another tenant"])
@pytest.mark.parametrize(("method", "suffix", "body"), ACTION_ROUTES)
def test_an_action_outside_the_tokens_conversation_is_a_404_and_stays_as_it_was(
    api: httpx.Client,
    sandbox: Sandbox,
    owner: str,
    method: str,
    suffix: str,
    body: dict[str, Any] | None,
) -> None:
    owner_key = {"another conversation": ACME, "another tenant": bearer(GLOBEX_KEY)}[owner]
    op = _booking(api, new_id("conv"), owner_key)
    before = api.get(f"/v1/actions/{op}", headers=owner_key).json()
    token = mint_conversation_token(KEY, "acme", new_id("conv"), ttl_s=600)
    response = api.request(method, f"/v1/actions/{op}{suffix}", json=body, headers=bearer(token))
    _error(response, 404, "not_found")
    assert api.get(f"/v1/actions/{op}", headers=owner_key).json() == before
    assert sandbox.requests(f"acme:{op}") == [] and sandbox.requests(f"globex:{op}") == []


def test_amending_and_the_routes_beyond_v1_need_the_key(api: httpx.Client, answers: Answers) -> None:
    conversation = new_id("conv")
    token = mint_conversation_token(KEY, "acme", conversation, ttl_s=600)
    op = _booking(api, conversation)
    amend = api.post(
        f"/v1/actions/{op}/amend", json={"params": {**BOOKING, "day": "Friday"}}, headers=bearer(token)
    )
    _error(amend, 403, "forbidden")
    assert api.get(f"/v1/actions/{op}", headers=ACME).json()["params"] == BOOKING
    _error(api.post("/codec/decode", json={"payloads": []}, headers=bearer(token)), 403, "forbidden")
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    mcp_headers = {**bearer(token), "Accept": "application/json, text/event-stream"}
    _error(
        api.post("/mcp", params={"conversation": conversation}, json=mcp, headers=mcp_headers),
        401,
        "unauthorized",
    )
    tool = {"conversation_id": conversation, "tool": "verify_action", "params": {}}
    _error(api.post("/v1/platforms/elevenlabs/tools", json=tool, headers=bearer(token)), 401, "unauthorized")
    _never_echoed(answers, KEY, token)


def _tampered(token: str) -> str:
    payload, signature = token.removeprefix("sc1.").split(".")
    return f"sc1.{payload}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BB'}"


def _conversation_swapped(conversation: str) -> str:
    """A token of another conversation, its payload rewritten to name this one (the signature kept)."""
    good = mint_conversation_token(KEY, "acme", new_id("conv"), ttl_s=600)
    theirs = mint_conversation_token(KEY, "acme", conversation, ttl_s=600)
    return f"{theirs.split('.')[0]}.{theirs.split('.')[1]}.{good.split('.')[2]}"


REFUSED: dict[str, Any] = {
    "expired": lambda c: mint_conversation_token(KEY, "acme", c, ttl_s=60, now=time.time() - 61),
    "tampered signature": lambda c: _tampered(mint_conversation_token(KEY, "acme", c, ttl_s=600)),
    "another token's signature": _conversation_swapped,
    "signed with another tenant's key": lambda c: mint_conversation_token(GLOBEX_KEY, "acme", c, ttl_s=600),
    "signed with no tenant's key": lambda c: mint_conversation_token("guessed-key-0000", "acme", c),
    "living beyond 24 h": lambda c: sign(CONVERSATION_TOKEN, KEY, "acme", c, int(time.time()) + 86_400 * 30),
    # Domain separation: a page link's signature is not a conversation token's.
    "a page link relabelled": lambda c: (
        mint_link(Settings(api_keys=parse_api_keys(KEYS)), c, "acme", ttl_s=600)
        .split("?t=")[1]
        .replace("sl1.", "sc1.")
    ),
    "malformed": lambda c: "sc1.not-a-token",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_token_that_is_not_valid_opens_nothing(api: httpx.Client, answers: Answers, case: str) -> None:
    conversation = new_id("conv")
    op = _booking(api, conversation)
    token = REFUSED[case](conversation)
    auth = bearer(token)
    _error(api.get(f"/v1/actions/{op}", headers=auth), 401, "unauthorized")
    _error(api.get(f"/v1/conversations/{conversation}/handoff", headers=auth), 401, "unauthorized")
    body = {
        "conversation_id": conversation,
        "kind": "room_booking",
        "params": BOOKING,
        "operation_id": new_id(),
    }
    _error(api.post("/v1/actions", json=body, headers=auth), 401, "unauthorized")
    assert api.get(f"/v1/actions/{body['operation_id']}", headers=ACME).status_code == 404
    _never_echoed(answers, KEY, token)


def test_rotating_the_tenants_key_ends_its_tokens(stack: Stack, keyed: Stack, tmp_path: Path) -> None:
    conversation = new_id("conv")
    old = bearer(mint_conversation_token(KEY, "acme", conversation, ttl_s=600))
    with httpx.Client(base_url=keyed.api_url, timeout=40) as before:
        op = _booking(before, conversation, old)
    rotated = second_api(stack, tmp_path, SETTLED_API_KEYS=f"acme:{ROTATED_KEY},globex:{GLOBEX_KEY}")
    try:
        with httpx.Client(base_url=rotated.api_url, timeout=40) as after:
            _error(after.get(f"/v1/actions/{op}", headers=old), 401, "unauthorized")
            new = bearer(mint_conversation_token(ROTATED_KEY, "acme", conversation, ttl_s=600))
            assert after.get(f"/v1/actions/{op}", headers=new).json()["conversation_id"] == conversation
    finally:
        rotated.stop()


def test_neither_key_nor_token_reaches_the_apis_log(keyed: Stack, api: httpx.Client) -> None:
    conversation = new_id("conv")
    token = mint_conversation_token(KEY, "acme", conversation, ttl_s=600)
    op = _booking(api, conversation, bearer(token))
    with api.stream("GET", f"/v1/conversations/{conversation}/stream", params={"t": token}) as stream:
        assert next(line for line in stream.iter_lines() if line.startswith("data:"))
    api.get(f"/v1/actions/{op}", headers=bearer(_tampered(token)))
    api_log = keyed.data_dir / "logs" / "api.log"

    def seen() -> str | None:
        """The log, once it is the API's and has seen these calls (its own worker notes the action a
        moment after the answer)."""
        text = api_log.read_text()
        return text if op in text else None

    log = wait_for(seen, what="the action in the API's log")
    for secret in (KEY, token, token.split(".")[2]):
        assert secret not in log


def test_settled_token_prints_one_the_api_accepts(api: httpx.Client) -> None:
    conversation = new_id("conv")
    op = _booking(api, conversation)
    env = {**os.environ, "SETTLED_API_KEYS": KEYS}
    command = [sys.executable, "-m", "settled", "token", conversation, "--tenant", "acme", "--ttl", "600"]
    printed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    token = printed.stdout.strip()
    assert token.startswith("sc1.") and KEY not in printed.stdout + printed.stderr
    assert api.get(f"/v1/actions/{op}", headers=bearer(token)).json()["conversation_id"] == conversation
    too_long = subprocess.run([*command[:-1], "86401"], env=env, capture_output=True, text=True, timeout=60)
    assert too_long.returncode == 2 and "at most 86400" in too_long.stderr
