"""Request size limit, enforced on the raw ASGI stream (Content-Length can be absent or lie)."""

from collections.abc import Collection, Mapping

from settled.api.errors import send_error
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """An HTTPException, because FastAPI turns any other error raised while reading a body into a 400."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"the body is larger than {max_bytes} bytes")


class BodySizeLimit:
    """`max_bytes` per body; under a path prefix of `larger`, that prefix's own limit instead. The
    `streamed` paths are not limited here: their routes read the body as a stream and bound what they
    keep themselves."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        larger: Mapping[str, int] | None = None,
        streamed: Collection[str] = (),
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = {prefix: BodySizeLimit(app, limit) for prefix, limit in (larger or {}).items()}
        self.streamed = frozenset(streamed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.streamed:
            await self.app(scope, receive, send)
            return
        for prefix, limit in self.larger.items():
            if scope["path"].startswith(prefix):
                await limit(scope, receive, send)
                return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        seen = 0
        exceeded = False
        started = False

        async def limited_receive() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded:
                # Whatever the app made of the cut body (a 400 from a route that caught the error),
                # the answer is a 413; the app's own response is dropped.
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._reject(send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send)

    async def _reject(self, send: Send) -> None:
        message = f"the body is larger than {self.max_bytes} bytes"
        # The rest of the body is never read: the connection cannot be reused.
        await send_error(send, 413, "payload_too_large", message, [(b"connection", b"close")])
