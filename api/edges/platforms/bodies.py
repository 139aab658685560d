"""A platform webhook's body, read as it streams in. Every message type a platform sends to its URL
is answered, whatever its size: a platform disables a webhook that fails. So the body is never held
whole before its type is known. Its signature is computed over every chunk; its type is read from its
first bytes; a type settled reads is kept, up to the platform body cap; any other type (a call's
audio, a transcript's progress) is read to its end and dropped, in bounded memory.

The routes that read this way are exempt from the API's body size limit (`STREAMED_PATHS`): each
bounds what it keeps itself."""

import contextlib
from collections.abc import Collection
from dataclasses import dataclass

import ijson
from fastapi import Request
from settled.api.edges.platforms.webhooks import PLATFORM_BODY_BYTES, Signature
from settled.api.limits import BodyTooLarge

STREAMED_PATHS = frozenset(
    {"/v1/platforms/vapi", "/v1/platforms/retell/events", "/v1/platforms/elevenlabs/events"}
)
# Where the type is looked for: the platforms put it first. A body whose type is not within this many
# bytes is kept as a type settled reads (so the body cap applies to it).
TYPE_WITHIN_BYTES = 64 * 1024
_SLICE_BYTES = 4096


@dataclass(frozen=True)
class Webhook:
    """A webhook's message type (None when it has none) and its body (None: a type settled does not
    read, read to its end and dropped)."""

    type: str | None
    body: bytes | None


class _TypeReader:
    """The string at `path` (say `message.type`), read by a streaming JSON parser from the body's
    first TYPE_WITHIN_BYTES; it stops as soon as it knows (found, not there, or not JSON)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.type: str | None = None
        self.reading = True
        self._fed = 0
        self._events = ijson.sendable_list()
        self._parser = ijson.parse_coro(self._events)

    def feed(self, chunk: bytes) -> None:
        # A slice at a time: the parser's events (a tuple per token) are looked at and let go before
        # the next slice, so a chunk of many small tokens never piles them up.
        for start in range(0, len(chunk), _SLICE_BYTES):
            self._feed(chunk[start : start + _SLICE_BYTES])
            if not self.reading:
                return

    def _feed(self, piece: bytes) -> None:
        self._fed += len(piece)
        try:
            self._parser.send(piece)
        except ijson.JSONError:
            self._stop()
            return
        for prefix, event, value in self._events:
            if prefix == self.path and event == "string":
                self.type = value
                self._stop()
                return
        self._events.clear()
        if self._fed >= TYPE_WITHIN_BYTES:
            self._stop()

    def _stop(self) -> None:
        self.reading = False
        self._events.clear()
        with contextlib.suppress(ijson.JSONError):  # it was stopped before the body's end
            self._parser.close()


async def read_webhook(
    request: Request, type_at: str, reads: Collection[str], signature: Signature | None = None
) -> Webhook:
    """The body of a webhook whose type is the string at `type_at`, each chunk fed to `signature`. A
    type in `reads` (or a body whose type cannot be told) is kept, and one larger than the platform
    body cap is refused 413; any other type is dropped as it comes."""
    cap = max(PLATFORM_BODY_BYTES, request.app.state.settings.max_body_bytes)
    reader = _TypeReader(type_at)
    kept: list[bytes] | None = []
    size = 0
    async for chunk in request.stream():
        if signature is not None:
            signature.update(chunk)
        if reader.reading:
            reader.feed(chunk)
        if kept is None:
            continue
        if not reader.reading and reader.type is not None and reader.type not in reads:
            kept = None  # what was kept until the type was known goes too
            continue
        kept.append(chunk)
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge(cap)
    return Webhook(reader.type, None if kept is None else b"".join(kept))
