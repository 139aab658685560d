"""Input the /v1 routes refuse before anything else runs: JSON that is not JSON, and ids in the path that
are outside the contract's charset (§2)."""

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

from settled.domain.models import IDENTIFIER_PATTERN

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
PATH_IDS = ("operation_id", "conversation_id")


def is_identifier(value: str) -> bool:
    """Within the contract's id charset (fullmatch: `$` alone would let a trailing newline through)."""
    return _IDENTIFIER.fullmatch(value) is not None


def _not_json(constant: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON does not, and they would reach params as null.
    raise json.JSONDecodeError(f"{constant} is not a JSON value", constant, 0)


class _StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                raise json.JSONDecodeError("the body is not UTF-8", "", error.start) from None
            self._json = json.loads(text, parse_constant=_not_json)
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is parsed as JSON proper (RFC 8259): no NaN, no Infinity."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict


async def valid_path_ids(request: Request) -> None:
    """A router dependency, so it runs before the caller's tenant is resolved (a page link token looks
    its action up) and before the gateway is reached: a malformed id never becomes a Temporal call, and
    is a 422 even while Temporal is down."""
    for name in PATH_IDS:
        value = request.path_params.get(name)
        if value is not None and not is_identifier(value):
            raise HTTPException(422, f"{name}: must be 1-128 characters of A-Z a-z 0-9 . _ : -")
