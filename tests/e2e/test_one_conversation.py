"""An operation id belongs to one conversation. A create that names another conversation's operation id
(with the same kind and params, as a derived id would) is refused before the action's history is
touched, and gets nothing of that action: with a tenant key a 409 `operation_conflict`, with a
conversation token the very 404 a read of the id gives. Judged by the API's answers, the action's own
record (unchanged) and the sandbox's records (one write, nothing for the refused request).

The session's stack, with a second API process of its own keyed for acme (as the tokens tests do).
"""

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from settled.runtime.stack import Stack
from settled.tokens import mint_conversation_token
from tests.helpers import REFUND, Sandbox, new_id, second_api, wait_for

KEY = "acme-key-one-conversation-0123"
KEY_HEADERS = {"Authorization": f"Bearer {KEY}"}
# Whose credential sends a create: the tenant key, or a token for that one conversation.
CREDENTIALS = ("key", "token")


@pytest.fixture(scope="module")
def keyed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    api = second_api(stack, tmp_path_factory.mktemp("one-conversation-api"), SETTLED_API_KEYS=f"acme:{KEY}")
    yield api
    api.stop()


@pytest.fixture
def api(keyed: Stack) -> Iterator[httpx.Client]:
    """No credential of its own: each request brings one."""
    with httpx.Client(base_url=keyed.api_url, timeout=40) as client:
        yield client


def _headers(credential: str, conversation: str) -> dict[str, str]:
    if credential == "key":
        return KEY_HEADERS
    return {"Authorization": f"Bearer {mint_conversation_token(KEY, 'acme', conversation, ttl_s=600)}"}


def _refund(conversation: str, op: str, order: str) -> dict[str, Any]:
    params = {**REFUND, "order_id": order}
    return {
        "conversation_id": conversation,
        "kind": "refund",
        "params": params,
        "operation_id": op,
        "authorized": True,
    }


def _refused(answer: httpx.Response, credential: str, op: str, owner: str, read: httpx.Response) -> None:
    """The refusal for `credential`, holding nothing of the action of conversation `owner`."""
    expected = (409, "operation_conflict") if credential == "key" else (404, "not_found")
    assert (answer.status_code, answer.json()["error"]["code"]) == expected, answer.text
    assert set(answer.json()) == {"error"} and set(answer.json()["error"]) == {"code", "message"}
    for held in (owner, "confirmed", "r-", "history", "say"):
        assert held not in answer.text, answer.text
    if credential == "token":
        assert answer.json() == read.json()  # word for word what a read of the id answers


def _confirmed(api: httpx.Client, op: str) -> dict[str, Any]:
    def settled() -> dict[str, Any] | None:
        status = api.get(f"/v1/actions/{op}", headers=KEY_HEADERS).json()
        return dict(status) if status["state"] == "confirmed" else None

    return wait_for(settled, 60, f"{op} confirmed")


def _nothing_for(api: httpx.Client, conversation: str) -> None:
    """The refused request's conversation holds nothing: no action in its handoff."""
    handoff = api.get(f"/v1/conversations/{conversation}/handoff", headers=KEY_HEADERS).json()
    assert handoff["work"] == "idle" and handoff["actions"] == [], handoff


@pytest.mark.parametrize("second", CREDENTIALS)
@pytest.mark.parametrize("first", CREDENTIALS)
def test_another_conversations_operation_id_gets_nothing_of_its_action(
    api: httpx.Client, sandbox: Sandbox, first: str, second: str
) -> None:
    owner, other, op, order = new_id("conv-a"), new_id("conv-b"), new_id(), new_id("order")
    created = api.post("/v1/actions", json=_refund(owner, op, order), headers=_headers(first, owner))
    assert created.status_code == 201, created.text
    before = _confirmed(api, op)

    # The same request (same kind, same params: the same derived id) from another conversation,
    # asked twice: a repeat is refused just the same.
    headers = _headers(second, other)
    read = api.get(f"/v1/actions/{op}", headers=headers)
    for _ in range(2):
        answer = api.post("/v1/actions", json=_refund(other, op, order), params={"wait": 1}, headers=headers)
        _refused(answer, second, op, owner, read)

    # The action is as it was (no registration, nothing in its history), written once; the owner's
    # own repeat still meets it.
    assert api.get(f"/v1/actions/{op}", headers=KEY_HEADERS).json() == before
    assert len(sandbox.writes(f"acme:{op}")) == 1 and len(sandbox.records(f"acme:{op}", "refunds")) == 1
    _nothing_for(api, other)
    again = api.post("/v1/actions", json=_refund(owner, op, order), headers=_headers(first, owner))
    assert again.status_code == 200 and again.json()["state"] == "confirmed", again.text


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_two_conversations_asking_at_once_make_one_action(
    api: httpx.Client, sandbox: Sandbox, credential: str
) -> None:
    """Both orders at once: whichever start wins owns the id, the other is refused."""
    a, b, op, order = new_id("conv-a"), new_id("conv-b"), new_id(), new_id("order")

    def ask(conversation: str) -> httpx.Response:
        body = _refund(conversation, op, order)
        return api.post(
            "/v1/actions", json=body, params={"wait": 5}, headers=_headers(credential, conversation)
        )

    with ThreadPoolExecutor(2) as pool:
        answers = dict(zip((a, b), pool.map(ask, (a, b)), strict=True))
    won = [conversation for conversation, answer in answers.items() if answer.status_code == 201]
    assert len(won) == 1, {c: answer.text for c, answer in answers.items()}
    owner = won[0]
    (loser,) = {a, b} - {owner}
    assert answers[owner].json()["conversation_id"] == owner
    read = api.get(f"/v1/actions/{op}", headers=_headers(credential, loser))
    _refused(answers[loser], credential, op, owner, read)
    _confirmed(api, op)
    assert len(sandbox.writes(f"acme:{op}")) == 1 and len(sandbox.records(f"acme:{op}", "refunds")) == 1
    _nothing_for(api, loser)


def test_the_refusal_is_the_same_for_an_id_that_names_nothing(api: httpx.Client) -> None:
    """To a token, an id of another conversation and an id that exists nowhere are told apart by
    nothing: the one a create refuses, the other a read cannot find."""
    owner, other, op = new_id("conv-a"), new_id("conv-b"), new_id()
    body = _refund(owner, op, new_id("order"))
    assert api.post("/v1/actions", json=body, headers=KEY_HEADERS).status_code == 201
    headers = _headers("token", other)
    refused = api.post("/v1/actions", json={**body, "conversation_id": other}, headers=headers)
    missing = api.get(f"/v1/actions/{new_id()}", headers=headers)
    assert refused.status_code == missing.status_code == 404
    assert json.loads(refused.text) == json.loads(missing.text)
