"""Every error the sandbox answers is JSON `{"error": {"code", "message"}}`, like a real API's."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from settled.sandbox.drop import is_drop
from starlette.exceptions import HTTPException

log = logging.getLogger("sandbox")

CODES_BY_STATUS = {404: "not_found", 405: "method_not_allowed", 400: "bad_request"}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = CODES_BY_STATUS.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = jsonable_encoder(exc.errors(), exclude={"ctx", "url"})
    return JSONResponse(
        error_body("invalid_request", "the request is not valid", details=details), status_code=422
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    if not is_drop(exc):
        log.error("unexpected error", exc_info=exc)
    return JSONResponse(error_body("internal_error", f"{type(exc).__name__}: {exc}"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(Exception, _unexpected)
