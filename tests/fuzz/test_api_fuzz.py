"""Fuzz the channel API from its own OpenAPI schema: no 5xx, no stack traces, the contract's error shape.

Both of schemathesis' modes: positive (inputs the schema allows) and negative (inputs it forbids: wrong
types, ids outside the charset, missing fields, out-of-range `wait`), which must all be refused with a 4xx.
Each case with a JSON body is also sent with every string of it made no Unicode text (a lone surrogate,
as JSON's escape): always a 4xx.
"""

import json
from collections.abc import Mapping
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from settled.runtime.stack import Stack

EXAMPLES_PER_OPERATION = 15
SKIPPED = ("/stream", "/metrics")  # an endless stream, and plain text
TRACES = ("Traceback", 'File "', "pydantic_core", "temporalio.")
LONE = "\ud800"  # a lone surrogate: JSON's escapes carry it, no UTF-8 text can


def _check(case: schemathesis.Case, seen: list[int], not_text: list[int]) -> None:
    response = case.call(timeout=40)
    seen.append(response.status_code)
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}"
    _answered(response.status_code, response.text, {k.lower(): v for k, v in response.headers.items()})
    _check_not_text(case, not_text)


def _answered(status: int, text: str, headers: Mapping[str, Any]) -> None:
    assert not any(trace in text for trace in TRACES), text
    if status >= 400:
        content_type = headers["content-type"]
        content_type = content_type if isinstance(content_type, str) else content_type[0]
        assert content_type.startswith("application/json"), headers
        body = json.loads(text)
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
        assert all(isinstance(body["error"][key], str) and body["error"][key] for key in ("code", "message"))


def _spoiled(value: Any, keys: bool = False) -> Any:
    """The value with a lone surrogate added to every string: no Unicode text. Keys too, inside
    `params` (whose keys are the caller's own; elsewhere an unknown key is refused for being one)."""
    if isinstance(value, str):
        return value + LONE
    if isinstance(value, list):
        return [_spoiled(item, keys) for item in value]
    if isinstance(value, dict):
        return {(k + LONE if keys else k): _spoiled(v, keys or k == "params") for k, v in value.items()}
    return value


def _check_not_text(case: schemathesis.Case, seen: list[int]) -> None:
    """The case's JSON body again with no string of it Unicode text (sent as JSON's escapes): refused
    with a 4xx in the error shape, never accepted, never a 5xx."""
    if not isinstance(case.body, dict | list) or _spoiled(case.body) == case.body:
        return
    url = str(case.operation.base_url).rstrip("/") + case.formatted_path
    response = httpx.request(
        case.method,
        url,
        params=case.query,
        content=json.dumps(_spoiled(case.body)).encode(),
        headers={"content-type": "application/json"},
        timeout=40,
    )
    seen.append(response.status_code)
    assert 400 <= response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.text}"
    _answered(response.status_code, response.text, response.headers)


def _fuzz(stack: Stack, mode: GenerationMode) -> list[int]:
    schema = schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json")
    schema.config.update(base_url=stack.api_url)
    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [op for op in operations if not op.path.endswith(SKIPPED)]
    assert len(operations) >= 10
    seen: list[int] = []
    not_text: list[int] = []
    for operation in operations:
        run = settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=operation.as_strategy(mode))(lambda case: _check(case, seen, not_text)))
        try:
            run()
        except Unsatisfiable:
            # Negative mode, and nothing to get wrong (no parameters, no body): /healthz, /openapi.json.
            assert mode is GenerationMode.NEGATIVE and not operation.body and not operation.query
    # It really sent requests: several per operation.
    assert len(seen) >= 3 * len(operations)
    assert len(not_text) >= len(operations), "bodies that are no text were sent"
    return seen


def test_no_input_makes_a_server_error(stack: Stack) -> None:
    seen = _fuzz(stack, GenerationMode.POSITIVE)
    # The invalid ones were refused with a 4xx, and some were accepted.
    assert any(400 <= code < 500 for code in seen) and any(code < 300 for code in seen)


def test_no_forbidden_input_is_accepted_or_makes_a_server_error(stack: Stack) -> None:
    seen = _fuzz(stack, GenerationMode.NEGATIVE)
    # What the schema forbids is refused: almost always a 4xx. (A negative case can still be valid by
    # accident, e.g. a `wait` header the API does not read, so a few 2xx are not a failure.)
    refused = [code for code in seen if 400 <= code < 500]
    assert len(refused) >= 0.8 * len(seen), sorted(set(seen))
