"""CORS for the codec endpoint only: the Temporal UI calls it from the browser. Everything else
stays same-origin (CORS closed by default)."""

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


class CodecCors:
    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["POST", "OPTIONS"],
            allow_headers=["content-type", "authorization", "x-namespace"],
            allow_credentials=True,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/codec/"):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
