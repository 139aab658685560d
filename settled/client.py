"""A small typed async client for the channel API (docs/reference.md).

One `SettledClient` holds one shared `httpx.AsyncClient`. Every answer is a pydantic model
(`ActionStatus`, `Handoff`); every error the API answers raises `SettledAPIError` carrying the
contract's error code. `create_action` always sends an operation id (generating one if the caller
gives none), so it can retry a lost connection or a 503 with the same id: the create is
idempotent, a repeat can never become a second write.

    async with SettledClient("http://127.0.0.1:8000") as settled:
        action = await settled.create_action("c-42", "refund", {...}, authorized=True, wait=2)
        verdict = await settled.what_may_i_say(action.operation_id)
        print(verdict.claim, verdict.say)
"""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from settled.domain.canonical import is_text
from settled.domain.handoff import Handoff, Work
from settled.domain.models import WAIT_MAX_S, ActionStatus, Channel, KindInfo, KindList
from settled.domain.states import MAY_BE_IN_FLIGHT, SETTLED, Claim, State

try:  # with OpenTelemetry present, each call carries the caller's trace (a tool call's span) to settled
    from opentelemetry.propagate import inject as _carry_trace
except ImportError:  # the light install without it: nothing to carry
    _carry_trace = None

T = TypeVar("T")
EventType = Literal["channel_opened", "channel_closed", "interrupted"]

DEFAULT_URL = "http://127.0.0.1:8000"
# Transport errors after which a request may not have been sent at all, or whose answer was lost.
_TRANSPORT_ERRORS = (httpx.TransportError,)
# How long the server gets beyond a `wait` before the client gives up on the answer.
_WAIT_SLACK_S = 10.0


class SettledError(Exception):
    """Base of the client's errors: `code` is the contract's error code (or `unreachable`)."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class SettledAPIError(SettledError):
    """The API answered with an error body (`{"error": {"code", "message"}}`)."""


class SettledUnreachable(SettledError):
    """No answer from the API after the retries (connection refused, reset, timed out)."""

    def __init__(self, message: str) -> None:
        super().__init__("unreachable", message)


class CreatedAction(ActionStatus):
    """The status answered by a create; `created` is false for a repeat of a known operation id."""

    created: bool = True


class Verdict(BaseModel):
    """What a channel may truthfully say about one action, from verified state only."""

    operation_id: str
    kind: str
    state: State
    claim: Claim
    say: str
    business_ref: str | None
    needs_attention: bool
    action: ActionStatus


class ConversationVerdict(BaseModel):
    """What a channel may truthfully say about a whole conversation (the handoff, reconciled)."""

    conversation_id: str
    work: Work
    say: str
    actions: list[Verdict]


def new_operation_id() -> str:
    return f"op_{uuid.uuid4().hex}"


def verdict_of(action: ActionStatus) -> Verdict:
    return Verdict(
        operation_id=action.operation_id,
        kind=action.kind,
        state=action.state,
        claim=action.claim,
        say=action.say,
        business_ref=action.business_ref,
        needs_attention=action.needs_attention,
        action=action,
    )


class SettledClient:
    """The channel API over one shared `httpx.AsyncClient`.

    `retries` applies to idempotent calls (every read, the create with its operation id, reconcile,
    channel events, presented): a connection error or a 503 is retried with backoff. Controls whose
    repeat is not harmless to retry blindly (authorize with a wait, amend, cancel) are retried only
    when the connection was never made.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        http: httpx.AsyncClient | None = None,
        reports_heard: bool = True,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout_s)
        self._http.headers.update(headers)
        self._timeout_s = timeout_s
        self._retries = retries
        self._backoff_s = backoff_s
        # False for a door that never reports what the person heard: its actions close once settled
        # instead of lingering for a `presented` (the create's `reports_heard=false`).
        self._reports_heard = reports_heard

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "SettledClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- actions ---------------------------------------------------------------------------------

    async def create_action(
        self,
        conversation_id: str,
        kind: str,
        params: dict[str, Any],
        *,
        operation_id: str | None = None,
        authorized: bool = False,
        authorized_by: str | None = None,
        wait: float | None = None,
    ) -> CreatedAction:
        """Record the action durably (201), or answer the known one for a repeated id (200)."""
        body: dict[str, Any] = {
            "conversation_id": conversation_id,
            "kind": kind,
            "params": params,
            "operation_id": operation_id or new_operation_id(),
            "authorized": authorized,
        }
        if authorized_by is not None:
            body["authorized_by"] = authorized_by
        query = None if self._reports_heard else {"reports_heard": "false"}
        response = await self._send("POST", "/v1/actions", body, wait=wait, query=query, idempotent=True)
        return CreatedAction.model_validate({**response.json(), "created": response.status_code == 201})

    async def get(self, operation_id: str) -> ActionStatus:
        return await self._status("GET", f"/v1/actions/{operation_id}", None, idempotent=True)

    async def authorize(
        self, operation_id: str, by: str | None = None, *, wait: float | None = None
    ) -> ActionStatus:
        # A repeated authorize is a 200 no-op by contract, so it is safe to retry.
        return await self._status(
            "POST", f"/v1/actions/{operation_id}/authorize", {"by": by}, wait, idempotent=True
        )

    async def amend(self, operation_id: str, params: dict[str, Any]) -> ActionStatus:
        return await self._status(
            "POST", f"/v1/actions/{operation_id}/amend", {"params": params}, None, False
        )

    async def cancel(
        self,
        operation_id: str,
        by: str | None = None,
        reason: str | None = None,
        *,
        wait: float | None = None,
    ) -> ActionStatus:
        body = {"by": by, "reason": reason}
        return await self._status("POST", f"/v1/actions/{operation_id}/cancel", body, wait, idempotent=False)

    async def reconcile(self, operation_id: str, *, wait: float | None = None) -> ActionStatus:
        return await self._status(
            "POST", f"/v1/actions/{operation_id}/reconcile", None, wait, idempotent=True
        )

    async def presented(
        self,
        operation_id: str,
        channel: Channel,
        text: str,
        completed: bool,
        *,
        for_state: State | None = None,
    ) -> ActionStatus:
        """Record what a channel presented. `for_state`: the state of the status the text came from
        (a sentence about `running` finished after the action confirmed did not present the outcome)."""
        body: dict[str, Any] = {"channel": channel, "text": text[:4000], "completed": completed}
        if for_state is not None:
            body["for_state"] = for_state.value
        return await self._status(
            "POST", f"/v1/actions/{operation_id}/presented", body, None, idempotent=True
        )

    # -- conversations ---------------------------------------------------------------------------

    async def conversation_event(
        self, conversation_id: str, type: EventType, channel: Channel, reason: str | None = None
    ) -> dict[str, Any]:
        body = {"type": type, "channel": channel, "reason": reason}
        path = f"/v1/conversations/{conversation_id}/events"
        response = await self._send("POST", path, body, idempotent=True)
        answer: dict[str, Any] = response.json()
        return answer

    async def kinds(self) -> list[KindInfo]:
        """The kinds the API offers (`GET /v1/kinds`): what a channel needs to offer them as tools."""
        response = await self._send("GET", "/v1/kinds", idempotent=True)
        return KindList.model_validate(response.json()).kinds

    async def handoff(self, conversation_id: str) -> Handoff:
        response = await self._send("GET", f"/v1/conversations/{conversation_id}/handoff", idempotent=True)
        return Handoff.model_validate(response.json())

    async def stream(self, conversation_id: str) -> AsyncIterator[ActionStatus]:
        """Every action of the conversation as it is now, then every change, in order (SSE)."""
        path = f"/v1/conversations/{conversation_id}/stream"
        # No read timeout: the server pings every 15 s and the stream is meant to stay open.
        timeout = httpx.Timeout(self._timeout_s, read=None)
        async with self._http.stream("GET", path, timeout=timeout, headers=_trace_headers()) as response:
            if response.status_code >= 400:
                await response.aread()
                raise _api_error(response)
            event, data = "message", []
            async for line in response.aiter_lines():
                if line == "":
                    if event == "action" and data:
                        yield ActionStatus.model_validate_json("\n".join(data))
                    event, data = "message", []
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        event = value
                    elif field == "data":
                        data.append(value)

    async def await_settled(self, operation_id: str, timeout_s: float) -> ActionStatus:
        """The action once confirmed (and not being reversed), failed or cancelled, or as it is when
        `timeout_s` ends."""
        current = await self.get(operation_id)
        if is_final(current):
            return current
        try:
            async with asyncio.timeout(timeout_s), aclosing(self.stream(current.conversation_id)) as events:
                async for status in events:
                    if status.operation_id == operation_id and is_final(status):
                        return status
        except TimeoutError:
            pass
        return await self.get(operation_id)

    # -- what may I say --------------------------------------------------------------------------

    async def what_may_i_say(self, operation_id: str, wait: float = 2.0) -> Verdict:
        """Check the business system now (a reconcile with a short wait), then the verified sentence."""
        return verdict_of(await self._reconciled(operation_id, wait))

    async def what_may_i_say_in(self, conversation_id: str, wait: float = 2.0) -> ConversationVerdict:
        """The same for every action of a conversation: the handoff, after reconciling what is in flight."""
        handoff = await self.handoff(conversation_id)
        pending = [a.operation_id for a in handoff.actions if a.state in MAY_BE_IN_FLIGHT]
        if pending:
            await asyncio.gather(*(self._reconciled(op, wait) for op in pending))
            handoff = await self.handoff(conversation_id)
        return ConversationVerdict(
            conversation_id=conversation_id,
            work=handoff.work,
            say=handoff.say,
            actions=[verdict_of(action) for action in handoff.actions],
        )

    async def _reconciled(self, operation_id: str, wait: float) -> ActionStatus:
        wait = min(max(wait, 0.0), WAIT_MAX_S)
        deadline = time.monotonic() + wait
        status = await self.reconcile(operation_id, wait=wait)
        # A reconcile that finds a lookup already due answers at once: keep watching for the rest
        # of the wait rather than report a state that is about to change.
        remaining = deadline - time.monotonic()
        if status.state in MAY_BE_IN_FLIGHT and remaining > 0:
            status = await self.await_settled(operation_id, remaining)
        return status

    # -- transport -------------------------------------------------------------------------------

    async def _status(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        wait: float | None = None,
        *,
        idempotent: bool,
    ) -> ActionStatus:
        response = await self._send(method, path, body, wait=wait, idempotent=idempotent)
        return ActionStatus.model_validate(response.json())

    async def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        wait: float | None = None,
        query: dict[str, str] | None = None,
        idempotent: bool,
    ) -> httpx.Response:
        params: dict[str, str | float] = {**(query or {})}
        if wait is not None:
            params["wait"] = wait
        timeout = self._timeout_s + (wait or 0) + (_WAIT_SLACK_S if wait else 0)
        headers = _trace_headers() or {}
        content = None
        if body is not None:
            content = _json(body)
            headers["Content-Type"] = "application/json"
        if not is_text(path):
            # An id that is no Unicode text cannot be put in a URL; the API refuses every such id.
            shown = path.encode("ascii", "backslashreplace").decode()
            raise SettledError("invalid_request", f"{shown}: an id is not valid Unicode text", 422)

        async def once() -> httpx.Response:
            return await self._http.request(
                method, path, content=content, params=params or None, timeout=timeout, headers=headers
            )

        response = await self._retrying(once, idempotent)
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    async def _retrying(
        self, call: Callable[[], Awaitable[httpx.Response]], idempotent: bool
    ) -> httpx.Response:
        last: Exception | None = None
        for attempt in range(self._retries + 1):
            if attempt:
                await asyncio.sleep(min(self._backoff_s * 2 ** (attempt - 1), 2.0))
            try:
                response = await call()
            except httpx.ConnectError as error:  # never reached the server: always safe to retry
                last = error
                continue
            except _TRANSPORT_ERRORS as error:
                if not idempotent:
                    raise SettledUnreachable(f"{type(error).__name__}: {error}") from error
                last = error
                continue
            if response.status_code == 503 and idempotent and attempt < self._retries:
                continue
            return response
        raise SettledUnreachable(f"no answer after {self._retries + 1} attempts: {last!r}")


def _json(body: dict[str, Any]) -> bytes:
    """The body as httpx would write it, except that a lone surrogate (no Unicode text, which UTF-8
    cannot carry) is sent as JSON's `\\udXXX` escape, for the API to refuse by name, rather than
    failing here: in JSON text it can only stand inside a string, where that escape means it."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "backslashreplace")


def _trace_headers() -> dict[str, str] | None:
    """The current trace context as headers (`traceparent`), if OpenTelemetry is installed and a
    span is current; the propagators are OpenTelemetry's configured ones."""
    if _carry_trace is None:
        return None
    headers: dict[str, str] = {}
    _carry_trace(headers)
    return headers or None


def is_final(status: ActionStatus) -> bool:
    """Nothing more will happen on its own: confirmed (and not being reversed), failed or cancelled."""
    return status.state in SETTLED and not status.compensating


def _api_error(response: httpx.Response) -> SettledAPIError:
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "invalid_response", f"HTTP {response.status_code}: {response.text[:200]}"
    return SettledAPIError(code, message, response.status_code)
