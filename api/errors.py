"""Every error is `{"error": {"code", "message"}}` with a fitting status; never a stack trace."""

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from settled.gateway.gateway import GatewayError
from starlette.exceptions import HTTPException
from starlette.types import Send

log = logging.getLogger("settled.api")
# The HTTP status of each error code the gateway raises; any other is a 400.
GATEWAY_STATUS = {
    "not_found": 404,
    "unknown_kind": 422,
    "invalid_params": 422,
    "invalid_request": 422,
    "operation_conflict": 409,
    "already_dispatched": 409,
    "not_amendable": 409,
    "cannot_cancel": 409,
    "temporal_unavailable": 503,
}


class AnyTextJSONResponse(JSONResponse):
    """JSON answers that may echo a request's text (an error naming a key; a platform's tool call
    id): as Starlette writes them, except that a lone surrogate is written as JSON's `\\udXXX` escape
    instead of failing the answer with a 500. Outside strings JSON text is ASCII, so only a string can
    hold one, and there that escape means it. Text is written byte for byte as before."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")


async def send_error(
    send: Send, status: int, code: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """The contract's error, sent from an ASGI middleware (before any route runs)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*start, *headers]})
    await send({"type": "http.response.body", "body": body})


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return AnyTextJSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _location(loc: tuple[object, ...]) -> str:
    parts = [str(part) for part in loc if part not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def settled_error(_: Request, error: GatewayError) -> JSONResponse:
        if error.code == "temporal_refused":  # to a channel, Temporal refusing settled is unavailability
            return error_response(503, "temporal_unavailable", error.message)
        return error_response(GATEWAY_STATUS.get(error.code, 400), error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first.get("type") == "json_invalid":
            return error_response(400, "invalid_request", "the body is not valid JSON")
        return error_response(422, "invalid_request", f"{_location(tuple(first['loc']))}: {first['msg']}")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        codes = {
            401: "unauthorized",
            403: "forbidden",
            404: "not_found",
            405: "invalid_request",
            413: "payload_too_large",
        }
        return error_response(
            error.status_code, codes.get(error.status_code, "invalid_request"), str(error.detail)
        )

    @app.exception_handler(Exception)
    async def unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(
            500, "internal", "internal error; the operation's state is unchanged or durable"
        )
