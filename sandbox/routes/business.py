"""The business routes of one service: create, look up (by id or by key), cancel."""

import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from settled.sandbox.actions import Cancel, Create, Lookup
from settled.sandbox.handling import Reply, answer, error_reply, guarded, perform
from settled.sandbox.requestlog import LoggedCall
from settled.sandbox.services import ServiceSpec
from settled.sandbox.state import Sandbox, sandbox_of
from settled.sandbox.store import Record, fingerprint
from starlette.responses import Response

KEY_HEADER = "Idempotency-Key"
NOT_JSON = object()


def idempotency_key(request: Request) -> str | None:
    """The key, bare or as the draft's structured-field string ("..."); empty counts as missing."""
    value = request.headers.get(KEY_HEADER, "").strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value or None


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else NOT_JSON
    except ValueError:
        return NOT_JSON


def _reference(data: Any) -> str | None:
    value = data.get("client_reference") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _invalid(message: str, **extra: Any) -> Reply:
    return error_reply(422, "invalid_request", message, "invalid", **extra)


def business_router(spec: ServiceSpec) -> APIRouter:
    router = APIRouter(prefix=f"/{spec.name}", tags=[spec.name])

    @router.post("")
    async def create(request: Request) -> Response:
        sandbox = sandbox_of(request)
        data = _parse(await request.body())
        key, reference = idempotency_key(request), _reference(data)
        call = sandbox.log.start(
            spec.name, "create", "POST", request.url.path, key, reference, request.headers.get("traceparent")
        )
        return await guarded(sandbox, call, _create(sandbox, spec, call, request, data, key, reference))

    @router.get("/by-key/{key:path}")
    async def lookup_by_key(key: str, request: Request) -> Response:
        sandbox = sandbox_of(request)
        record = sandbox.store.find(spec.name, key)
        reference = record.client_reference if record else None
        call = sandbox.log.start(
            spec.name, "lookup", "GET", request.url.path, key, reference, request.headers.get("traceparent")
        )
        action = Lookup(
            spec,
            lambda: sandbox.store.find(spec.name, key),
            f"key {key!r}",
            in_flight=lambda: sandbox.write_in_flight(spec.name, key),
        )
        identity = [key, *_identity(record)]
        return await guarded(sandbox, call, perform(sandbox, call, identity, request, action))

    @router.get("/{record_id}")
    async def lookup(record_id: str, request: Request) -> Response:
        sandbox = sandbox_of(request)
        record = sandbox.store.get(spec.name, record_id)
        call = _start_on_record(sandbox, spec, "lookup", request, record)
        action = Lookup(spec, lambda: sandbox.store.get(spec.name, record_id), record_id)
        return await guarded(sandbox, call, perform(sandbox, call, _identity(record), request, action))

    @router.post("/{record_id}/cancel")
    async def cancel(record_id: str, request: Request) -> Response:
        sandbox = sandbox_of(request)
        record = sandbox.store.get(spec.name, record_id)
        call = _start_on_record(sandbox, spec, "cancel", request, record)
        action = Cancel(sandbox.store, spec, record_id)
        return await guarded(sandbox, call, perform(sandbox, call, _identity(record), request, action))

    return router


def _identity(record: Record | None) -> list[str | None]:
    return [record.key, record.client_reference] if record else []


def _start_on_record(
    sandbox: Sandbox, spec: ServiceSpec, op: str, request: Request, record: Record | None
) -> LoggedCall:
    # Requests by id carry no key: log the record's, so a test can find them by operation key.
    key, reference = (record.key, record.client_reference) if record else (None, None)
    traceparent = request.headers.get("traceparent")
    return sandbox.log.start(spec.name, op, request.method, request.url.path, key, reference, traceparent)


async def _create(
    sandbox: Sandbox,
    spec: ServiceSpec,
    call: LoggedCall,
    request: Request,
    data: Any,
    key: str | None,
    reference: str | None,
) -> Response:
    if key is None and spec.key_required:
        message = f"{spec.name} requires an {KEY_HEADER} header"
        return answer(sandbox, call, error_reply(400, "idempotency_key_missing", message, "rejected"))
    if data is NOT_JSON or not isinstance(data, dict):
        return answer(sandbox, call, _invalid("the body must be a JSON object"))
    try:
        spec.model.model_validate(data)
    except ValidationError as exc:
        details = exc.errors(include_url=False, include_context=False, include_input=False)
        return answer(sandbox, call, _invalid("the request is not valid", details=details))
    if key is None:
        # No key, no deduplication: every such request creates a record.
        action = Create(sandbox.store, spec, data, reference, settings=sandbox.transfers)
        return await perform(sandbox, call, [reference], request, action)
    claim = sandbox.store.claim(spec.name, key, fingerprint(data))
    if claim.verdict == "replay":
        assert claim.status is not None and claim.body is not None
        replay = Reply(claim.status, claim.body, "replayed", {"Idempotent-Replayed": "true"})
        return answer(sandbox, call, replay)
    if claim.verdict == "reused":
        message = f"{KEY_HEADER} {key!r} was already used with a different request body"
        return answer(sandbox, call, error_reply(422, "idempotency_key_reused", message, "key_reused"))
    if claim.verdict == "in_flight":
        message = f"a request with {KEY_HEADER} {key!r} is still being processed"
        return answer(sandbox, call, error_reply(409, "idempotency_key_in_flight", message, "key_in_flight"))
    action = Create(sandbox.store, spec, data, reference, key, claim.token, sandbox.transfers)
    return await perform(sandbox, call, [key, reference], request, action)
