"""A platform webhook's body, read as it streams in. Every message type a platform sends to its URL
is answered, whatever its size: a platform disables a webhook that fails. So the body is never held
whole: its signature is computed over every chunk, and a streaming JSON parser picks out of it only
the few fields the route acts on (the type, the call's id, why it ended, the tool calls). A type the
route does not act on (a call's audio, a transcript's progress) stops the parser as soon as it is
known; the rest is only signed, then dropped.

What is held is each chunk while it is signed and parsed, the parser's current token (one JSON
string: the largest single value, such as a transcript, not the body) and the fields picked, of which
only a tool-call list is more than a few strings: it is kept whole, up to the platform body cap.

The routes that read this way are exempt from the API's body size limit (`STREAMED_PATHS`): each
bounds what it keeps itself."""

import contextlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import ijson
from fastapi import HTTPException, Request
from settled.api.edges.platforms.webhooks import PLATFORM_BODY_BYTES, Signature
from settled.api.limits import BodyTooLarge

STREAMED_PATHS = frozenset(
    {"/v1/platforms/vapi", "/v1/platforms/retell/events", "/v1/platforms/elevenlabs/events"}
)
# The parser is fed this much at a time: its events (a tuple per token) are looked at and let go
# before the next slice, so a chunk of many small tokens never piles them up.
_SLICE_BYTES = 4096
_SCALARS = frozenset({"string", "number", "boolean", "null"})
_STARTS = {"start_map": dict, "start_array": list}
# What a number, a boolean, a null or a container's bracket counts for against a whole value's cap.
_TOKEN_BYTES = 8
# ijson's pure-Python backend: its C backend turns a lone surrogate (`"\\ud800"`) into "?", which would
# change a tool call's params or id in silence; this one reads JSON text as `json.loads` does (a few
# tenths of a second for a 6 MiB body).
_JSON = ijson.get_backend("python")


@dataclass(frozen=True)
class Fields:
    """The fields picked from a webhook's body, by path (`message.call.id`); `problem` says why the
    body is not a JSON object (None: it is). Only read once the signature was checked."""

    picked: dict[str, Any]
    problem: str | None

    def checked(self) -> dict[str, Any]:
        """The fields; 400 when the body is not a JSON object."""
        if self.problem is not None:
            raise HTTPException(400, self.problem)
        return self.picked


class _Picker:
    """Picks fields out of a JSON body fed to it in pieces, by ijson path: the last scalar at each
    of `scalars` (a container there is recorded as an empty one of its kind: that it is there, not
    what it holds), and the whole value at each of `wholes`, up to `cap`. It stops, keeping what it
    picked, as soon as the string at `type_at` is one not in `acts_on`."""

    def __init__(
        self,
        type_at: str,
        acts_on: Collection[str],
        scalars: Collection[str],
        wholes: Collection[str],
        cap: int,
    ) -> None:
        self.type_at, self.acts_on, self.cap = type_at, acts_on, cap
        self.scalars, self.wholes = frozenset({type_at, *scalars}), frozenset(wholes)
        self.picked: dict[str, Any] = {}
        self.problem: str | None = None
        self.parsing = True
        self._started = False
        self._building: tuple[str, ijson.ObjectBuilder, int] | None = None  # path, builder, depth
        self._built_bytes = 0
        self._events = ijson.sendable_list()
        self._parser = _JSON.parse_coro(self._events, use_float=True)

    def feed(self, chunk: bytes) -> None:
        for start in range(0, len(chunk), _SLICE_BYTES):
            if not self.parsing:
                return
            try:
                self._parser.send(chunk[start : start + _SLICE_BYTES])
            except ijson.JSONError:
                self._fail("the body is not valid JSON")
                return
            self._take()

    def end(self) -> None:
        """The body has ended: the parser must have seen one whole JSON object."""
        if not self.parsing:
            return
        try:
            self._parser.close()
        except ijson.JSONError:
            self._fail("the body is not valid JSON")
            return
        self._take()
        if not self._started:
            self.problem = "the body is not valid JSON"

    def _take(self) -> None:
        for prefix, event, value in self._events:
            if not self._started:
                self._started = True
                if event != "start_map":
                    self._fail("the body is not a JSON object")
                    return
            if self._building is not None:
                self._build(event, value)
            elif prefix in self.wholes and event in _STARTS:
                self._building = (prefix, ijson.ObjectBuilder(), 0)
                self._built_bytes = 0
                self._build(event, value)
            elif prefix in self.scalars or prefix in self.wholes:
                if event in _SCALARS:
                    self.picked[prefix] = value
                elif event in _STARTS:
                    self.picked[prefix] = _STARTS[event]()
            if prefix == self.type_at and event == "string" and value not in self.acts_on:
                self._stop()
                return
        self._events.clear()

    def _build(self, event: str, value: Any) -> None:
        assert self._building is not None
        path, builder, depth = self._building
        builder.event(event, value)
        self._built_bytes += len(value) if isinstance(value, str) else _TOKEN_BYTES
        if self._built_bytes > self.cap:
            raise BodyTooLarge(self.cap)
        depth += 1 if event in _STARTS else -1 if event in ("end_map", "end_array") else 0
        if depth == 0:
            self.picked[path] = builder.value
            self._building = None
        else:
            self._building = (path, builder, depth)

    def _fail(self, problem: str) -> None:
        self.problem = problem
        self._stop()

    def _stop(self) -> None:
        self.parsing = False
        self._events.clear()
        with contextlib.suppress(ijson.JSONError):  # it was stopped before the body's end
            self._parser.close()


async def read_fields(
    request: Request,
    signature: Signature | None,
    type_at: str,
    acts_on: Collection[str],
    scalars: Collection[str],
    wholes: Collection[str] = (),
) -> Fields:
    """The fields at `scalars` and `wholes` of a webhook's body (see `_Picker`), each chunk fed to
    `signature` as it comes, whatever the body's size. A whole value larger than the platform body
    cap is refused 413."""
    cap = max(PLATFORM_BODY_BYTES, request.app.state.settings.max_body_bytes)
    picker = _Picker(type_at, acts_on, scalars, wholes, cap)
    async for chunk in request.stream():
        if signature is not None:
            signature.update(chunk)
        picker.feed(chunk)
    picker.end()
    return Fields(picker.picked, picker.problem)
