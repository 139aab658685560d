"""Fuzz the channel API from its own OpenAPI schema: no 5xx, no stack traces, the contract's error shape."""

import schemathesis
from hypothesis import HealthCheck, given, settings

from settled.stack import Stack

EXAMPLES_PER_OPERATION = 15
SKIPPED = ("/stream", "/metrics")  # an endless stream, and plain text


def _check(case: schemathesis.Case, seen: list[int]) -> None:
    response = case.call(timeout=40)
    seen.append(response.status_code)
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}"
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
        assert "Traceback" not in response.text


def test_no_input_makes_a_server_error(stack: Stack) -> None:
    schema = schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json")
    schema.config.update(base_url=stack.api_url)
    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [op for op in operations if not op.path.endswith(SKIPPED)]
    assert len(operations) >= 10
    seen: list[int] = []
    for operation in operations:
        run = settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=operation.as_strategy())(lambda case: _check(case, seen)))
        run()
    # It really sent requests, and the invalid ones were refused with a 4xx.
    assert len(seen) >= 3 * len(operations)
    assert any(400 <= code < 500 for code in seen) and any(code < 300 for code in seen)
