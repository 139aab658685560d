"""The test vectors that hold the TypeScript package to Python's rules, generated from Python:
params (as JSON text) → canonical form → operation id, ActionStatus fixtures → the adapters' tool
text, and a key, tenant, conversation and time → the conversation token. `python -m
tests.typescript.vectors` writes them to typescript/test/vectors.json; the TypeScript suite checks
every one, and tests/typescript/test_vectors.py fails when the file is not what Python generates now."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from settled.adapters.common import (
    ActionKind,
    check_answer,
    derived_operation_id,
    error_answer,
    tool_answer,
    tool_set,
)

from settled.client import SettledAPIError, SettledError, SettledUnreachable
from settled.domain.canonical import canonical_params
from settled.domain.models import ActionStatus
from settled.domain.states import State, claim_for
from settled.tokens import mint_conversation_token

PATH = Path(__file__).resolve().parents[2] / "typescript" / "test" / "vectors.json"

# Params as a model's tool call writes them: JSON text, parsed by each language itself.
PARAMS_TEXTS = [
    '{"order_id": "o-1", "amount": 25.5, "currency": "EUR"}',
    '{"currency": "EUR", "amount": 25.50, "order_id": "o-1"}',
    '{"n": 1}',
    '{"n": 1.0}',
    '{"n": 5e0}',
    '{"n": -0.0}',
    '{"n": 0.1, "m": 1e21, "k": 1e-7, "j": 123456789012345680000}',
    '{"big": 9007199254740993, "small": -9007199254740993, "safe": 9007199254740991}',
    '{"nested": {"b": [1, 2.0, {"z": null, "a": true}], "a": {"y": false}}, "list": []}',
    '{"name": "Ren\\u00e9e", "city": "Z\\u00fcrich"}',
    '{"name": "Rene\\u0301e", "city": "Zu\\u0308rich"}',
    '{"caf\\u00e9": "\\u65e5\\u672c\\u8a9e \\ud83d\\ude00", "\\ud83d\\ude00": 1, "\\uff21": 2, "a": 3}',
    '{"text": "line\\nbreak \\"quoted\\" \\\\ tab\\t \\u0001 \\u007f \\u2028"}',
    "{}",
]


def _ids() -> list[dict[str, Any]]:
    vectors = []
    for number, text in enumerate(PARAMS_TEXTS):
        params = json.loads(text)
        for round_ in (1, 3) if number == 0 else (1,):
            vectors.append(
                {
                    "conversation_id": f"conv-{number}",
                    "kind": "refund",
                    "params_json": text,
                    "round": round_,
                    "canonical": canonical_params(params),
                    "operation_id": derived_operation_id(f"conv-{number}", "refund", params, round_),
                }
            )
    return vectors


AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _status(state: State, **fields: Any) -> ActionStatus:
    base: dict[str, Any] = {
        "operation_id": f"op_{state.value}",
        "conversation_id": "conv-1",
        "kind": "refund",
        "params": {"order_id": "o-1", "amount": 25.5, "currency": "EUR"},
        "state": state,
        "authorized": True,
        "dispatched": state is not State.REQUESTED,
        "attempts": 0 if state is State.REQUESTED else 1,
        "business_ref": "r-17" if state is State.CONFIRMED else None,
        "reason": None,
        "cancel_requested": False,
        "compensated": False,
        "needs_attention": False,
        "claim": claim_for(state),
        "say": f"The sentence settled says when it is {state.value}.",
        "presented": None,
        "history": [{"state": state, "at": AT, "note": "fixture"}],
        "updated_at": AT,
    }
    return ActionStatus.model_validate({**base, **fields})


STATUSES = [
    _status(State.REQUESTED, authorized=False),
    _status(State.REQUESTED),
    _status(State.RUNNING),
    _status(State.UNKNOWN, reason="timeout"),
    _status(State.CONFIRMED),
    _status(State.CONFIRMED, compensating=True, cancel_requested=True),
    _status(State.FAILED, reason="rejected"),
    _status(State.CANCELLED),
]

ERRORS: list[SettledError] = [
    SettledAPIError("invalid_params", "amount: must be greater than 0", 422),
    SettledAPIError("invalid_request", "params: not an object", 422),
    SettledAPIError("operation_conflict", "another request has this id", 409),
    SettledAPIError("temporal_unavailable", "try again", 503),
    SettledUnreachable("no answer after 4 attempts"),
]

KINDS = [
    ActionKind("refund", "refund the order", {"type": "object"}, requires_authorization=True),
    ActionKind("room_booking", "reserve a meeting room", {"type": "object"}, tool_name="book_room"),
]


def _text() -> dict[str, Any]:
    return {
        "tool_answer": [
            {
                "status": status.model_dump(mode="json"),
                "authorize_tool": tool,
                "text": tool_answer(status, tool),
            }
            for status in STATUSES
            for tool in ("authorize_action", None)
        ],
        "check_answer": [
            {"statuses": [s.model_dump(mode="json") for s in group], "text": check_answer(group)}
            for group in ([], STATUSES[:1], STATUSES)
        ],
        "error_answer": [
            {
                "code": error.code,
                "message": error.message,
                "status": error.status,
                "text": error_answer(error),
            }
            for error in ERRORS
        ],
        "tool_set": {
            "kinds": [
                {
                    "kind": k.kind,
                    "description": k.description,
                    "paramsSchema": k.params_schema,
                    "requiresAuthorization": k.requires_authorization,
                    **({"toolName": k.tool_name} if k.tool_name else {}),
                }
                for k in KINDS
            ],
            "tools": [vars(spec) for spec in tool_set(KINDS)],
        },
    }


# (API key, tenant, conversation id, now in Unix seconds, ttl in seconds): a fractional time, the
# bounds of the ttl, a key beyond ASCII (both sides sign its UTF-8 bytes), the longest ids.
TOKEN_INPUTS = [
    ("acme-key-0123456789", "acme", "c-42", 1_765_000_000, 3600),
    ("acme-key-0123456789", "acme", "c-42", 1_765_000_000.75, 0.5),
    ("k", "t", "c", 0, 86_400),
    ("cl\u00e9-\u65e5\u672c-\U0001f600", "tenant_b", "conv.1:a_b-c", 1_765_432_109.999, 900),
    ("x" * 80, "T" * 64, "c" * 128, 2_000_000_000, 60),
]


def _tokens() -> list[dict[str, Any]]:
    return [
        {
            "key": key,
            "tenant": tenant,
            "conversation_id": conversation_id,
            "now": now,
            "ttl_s": ttl_s,
            "token": mint_conversation_token(key, tenant, conversation_id, ttl_s=ttl_s, now=now),
        }
        for key, tenant, conversation_id, now, ttl_s in TOKEN_INPUTS
    ]


def generate() -> str:
    vectors = {"ids": _ids(), "text": _text(), "conversation_tokens": _tokens()}
    return json.dumps(vectors, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    PATH.write_text(generate(), encoding="utf-8")
    print(f"wrote {PATH}")
