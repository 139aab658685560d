"""Dropping a connection mid-answer, the way a crash or a cut network does.

ASGI has no "close the socket" message, so the response sends its status line and headers, then
raises: uvicorn closes the transport when an app fails after the response started, and the
client sees a broken connection (httpx: RemoteProtocolError), never a status code.
"""

import logging

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

UVICORN_ERRORS = "uvicorn.error"


class ConnectionDropped(Exception):
    """Raised on purpose to make the server cut the connection."""


def is_drop(exc: BaseException | None) -> bool:
    # Starlette may wrap it (e.g. RuntimeError "response already started"): look down the chain.
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ConnectionDropped):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class DroppedResponse(Response):
    def __init__(self, status_code: int) -> None:
        super().__init__(status_code=status_code)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The promised length makes the missing body unmistakable to the client.
        headers = [(b"content-type", b"application/json"), (b"content-length", b"1024")]
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        raise ConnectionDropped("connection dropped by an injected fault")


class _QuietDrops(logging.Filter):
    """Keep uvicorn from logging a traceback for every drop we cause on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and is_drop(record.exc_info[1]))


_FILTER = _QuietDrops()


def quiet_drops() -> None:
    logger = logging.getLogger(UVICORN_ERRORS)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
