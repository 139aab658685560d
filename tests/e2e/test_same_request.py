"""The API's repeat check compares params as JSON values: a create repeated with `5.0` for `5` is the same
request (200, the one action, one write to a service that does not deduplicate), and other values are
another request (409). Bodies are sent as raw JSON text, as a client that writes `5e0` sends them."""

import json
import unicodedata

import httpx
import pytest

from tests.helpers import Sandbox, new_id, wait_state

KIND = "refund_nodedup"  # a second write would be a second refund


def raw_create(api: httpx.Client, operation_id: str, conversation: str, params_text: str) -> httpx.Response:
    body = (
        f'{{"conversation_id": "{conversation}", "operation_id": "{operation_id}", '
        f'"kind": "{KIND}", "params": {params_text}}}'
    )
    return api.post("/v1/actions", content=body, headers={"content-type": "application/json"})


SAME = [
    (
        '{"order_id": "%s", "amount": 5, "currency": "EUR"}',
        '{"currency": "EUR", "amount": 5.0, "order_id": "%s"}',
    ),
    (
        '{"order_id": "%s", "amount": 5, "currency": "EUR"}',
        '{"order_id": "%s", "amount": 5e0, "currency": "EUR"}',
    ),
    (
        '{"order_id": "%s", "amount": 7, "currency": "EUR", "note": {"lines": ["a", 1], "by": "agent"}}',
        '{"order_id": "%s", "currency": "EUR", "amount": 7.00, "note": {"by": "agent", "lines": ["a", 1.0]}}',
    ),
    (
        json.dumps(
            {"order_id": "%s", "amount": 9, "currency": "EUR", "city": unicodedata.normalize("NFC", "Zürich")}
        ),
        json.dumps(
            {
                "order_id": "%s",
                "amount": 9,
                "currency": "EUR",
                "city": unicodedata.normalize("NFD", "Zürich"),
            },
            ensure_ascii=False,
        ),
    ),
]


@pytest.mark.parametrize(("first", "again"), SAME, ids=["float", "exponent", "nested-and-list", "unicode"])
def test_a_repeat_written_otherwise_is_the_same_action_and_one_write(
    api: httpx.Client, sandbox: Sandbox, first: str, again: str
) -> None:
    op, conversation, order = new_id(), new_id("conv"), new_id("order")
    created = raw_create(api, op, conversation, first % order)
    assert created.status_code == 201, created.text
    wait_state(api, op, "confirmed")
    repeated = raw_create(api, op, conversation, again % order)
    assert repeated.status_code == 200, repeated.text
    assert repeated.json()["state"] == "confirmed" and repeated.json()["attempts"] == 1
    assert len(sandbox.writes(op)) == 1 and len(sandbox.records(op)) == 1


@pytest.mark.parametrize(
    "other",
    [
        '{"order_id": "%s", "amount": 5.1, "currency": "EUR"}',
        '{"order_id": "%s", "amount": 5, "currency": "EUR", "note": "5"}',
    ],
    ids=["another-number", "another-field"],
)
def test_other_values_are_another_request(api: httpx.Client, sandbox: Sandbox, other: str) -> None:
    op, conversation, order = new_id(), new_id("conv"), new_id("order")
    first = '{"order_id": "%s", "amount": 5, "currency": "EUR", "note": 5}' if "note" in other else None
    assert (
        raw_create(
            api, op, conversation, (first or '{"order_id": "%s", "amount": 5, "currency": "EUR"}') % order
        ).status_code
        == 201
    )
    refused = raw_create(api, op, conversation, other % order)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "operation_conflict"
    wait_state(api, op, "confirmed")
    assert len(sandbox.writes(op)) == 1


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_does_not_have_is_refused_before_anything_is_recorded(
    api: httpx.Client, number: str
) -> None:
    op = new_id()
    params = '{"order_id": "o", "amount": 5, "currency": "EUR", "note": {"x": [' + number + "]}}"
    refused = raw_create(api, op, new_id("conv"), params)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_request", refused.text
    assert api.get(f"/v1/actions/{op}").status_code == 404
