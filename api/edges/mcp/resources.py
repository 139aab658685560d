"""Each action is a resource, `settled://actions/{operation_id}` (its ActionStatus as JSON): readable,
and subscribable, so a client learns the late truth of a call that outlived its wait. A subscriber is
told `notifications/resources/updated` each time the action's durable record changes: through
`resources/subscribe` (on the session's standing stream) up to 2025-11-25, through a
`subscriptions/listen` stream on 2026-07-28. A tenant reads and subscribes to its own actions only:
another tenant's operation id is not found, as on /v1."""

import asyncio
import logging
from contextlib import aclosing
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from settled.api.edges.inprocess import edge_client
from settled.api.edges.mcp.caller import Caller
from settled.api.edges.mcp.watch import Watch
from settled.api.strict import is_identifier
from settled.gateway.gateway import GatewayError

from settled.client import SettledAPIError, SettledError
from settled.domain.models import ActionStatus

log = logging.getLogger("settled.api.edges.mcp")

PREFIX = "settled://actions/"
MIME = "application/json"
TEMPLATE = types.ResourceTemplate(
    name="action",
    title="A settled action",
    uri_template=PREFIX + "{operation_id}",
    description="The verified state of one action (its ActionStatus), from durable state.",
    mime_type=MIME,
)
# Subscriptions one session or one listen stream may hold at once.
MAX_WATCHES = 256
_WATCHES = "settled.watches"


def uri_of(operation_id: str) -> str:
    return PREFIX + operation_id


def operation_of(uri: str) -> str:
    operation_id = uri.removeprefix(PREFIX) if uri.startswith(PREFIX) else ""
    if not is_identifier(operation_id):
        raise MCPError(
            types.INVALID_PARAMS,
            f"no resource {uri[:200]!r}: expected {PREFIX}{{operation_id}}",
            {"uri": uri},
        )
    return operation_id


class Resources:
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def _status(self, caller: Caller, uri: str) -> ActionStatus:
        """The action's status as this caller may see it (another tenant's: not found)."""
        operation_id = operation_of(uri)
        try:
            async with edge_client(self.app, caller.api_key(self.app)) as client:
                return await client.get(operation_id)
        except SettledAPIError as error:
            if error.code == "not_found":
                raise MCPError(types.INVALID_PARAMS, f"no action {operation_id}", {"uri": uri}) from None
            raise MCPError(types.INTERNAL_ERROR, f"could not read {uri} ({error.code})") from None
        except SettledError as error:
            raise MCPError(types.INTERNAL_ERROR, f"could not read {uri} ({error.code})") from None

    async def _watch(self, caller: Caller, status: ActionStatus) -> Watch:
        try:
            return await Watch.start(self.app, caller.tenant, status.operation_id)
        except GatewayError as error:
            message = f"could not follow {uri_of(status.operation_id)} ({error.code})"
            raise MCPError(types.INTERNAL_ERROR, message) from None

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The conversation's actions, oldest first."""
        caller = Caller.of(ctx)
        if caller.conversation_problem() is not None:
            return types.ListResourcesResult(resources=[])
        assert caller.conversation_id is not None
        try:
            async with edge_client(self.app, caller.api_key(self.app)) as client:
                handoff = await client.handoff(caller.conversation_id)
        except SettledError as error:
            raise MCPError(types.INTERNAL_ERROR, f"could not list the actions ({error.code})") from None
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name=status.operation_id,
                    title=f"{status.kind}: {status.state.value}",
                    uri=uri_of(status.operation_id),
                    mime_type=MIME,
                )
                for status in handoff.actions
            ]
        )

    async def templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        status = await self._status(Caller.of(ctx), params.uri)
        contents = types.TextResourceContents(uri=params.uri, mime_type=MIME, text=status.model_dump_json())
        return types.ReadResourceResult(contents=[contents])

    # -- up to 2025-11-25: resources/subscribe, told on the session's standing stream ----------------

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        caller = Caller.of(ctx)
        status = await self._status(caller, params.uri)
        watches = _session_watches(ctx.session)
        if params.uri not in watches:
            if len(watches) >= MAX_WATCHES:
                raise MCPError(types.INVALID_REQUEST, f"at most {MAX_WATCHES} subscriptions a session")
            # Started before the answer: every change after the subscription is told.
            watch = await self._watch(caller, status)
            watches[params.uri] = asyncio.ensure_future(_tell(ctx.session, params.uri, watch))
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        task = _session_watches(ctx.session).pop(params.uri, None)
        if task is not None:
            task.cancel()
        return types.EmptyResult()

    # -- 2026-07-28: subscriptions/listen, whose answer is the stream ------------------------------

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        caller = Caller.of(ctx)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        wanted = list(dict.fromkeys(params.notifications.resource_subscriptions or []))[:MAX_WATCHES]
        # Honored: the resources this caller may read. The lists never change while the API runs,
        # so their flags are not honored (never acknowledged, never sent).
        watches: dict[str, Watch] = {}
        for uri in wanted:
            try:
                status = await self._status(caller, uri)
            except MCPError:
                continue
            watches[uri] = await self._watch(caller, status)
        honored = types.SubscriptionFilter(resource_subscriptions=list(watches) or None)
        changed: asyncio.Queue[str] = asyncio.Queue()

        async def follow(uri: str, watch: Watch) -> None:
            async with aclosing(watch.changes()) as changes:
                async for _ in changes:
                    changed.put_nowait(uri)

        tasks = [asyncio.ensure_future(follow(uri, watch)) for uri, watch in watches.items()]
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=ctx.request_id,
            )
            while True:
                uri = await changed.get()
                notification = types.ResourceUpdatedNotification(
                    params=types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)
                )
                await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _session_watches(session: ServerSession) -> dict[str, "asyncio.Task[None]"]:
    """The subscriptions of the session's connection, ended with it. The 2.3 SDK hands a lowlevel
    handler no `Connection` yet (its `Context` is not built by the runner), so it is read off the
    session."""
    connection = session._connection
    watches: dict[str, asyncio.Task[None]] | None = connection.state.get(_WATCHES)
    if watches is None:
        watches = connection.state[_WATCHES] = {}

        def end_all() -> None:
            for task in watches.values():
                task.cancel()

        connection.exit_stack.callback(end_all)
    return watches


async def _tell(session: ServerSession, uri: str, watch: Watch) -> None:
    try:
        async with aclosing(watch.changes()) as changes:
            async for _ in changes:
                await session.send_resource_updated(uri)
    except asyncio.CancelledError:
        raise
    except Exception:
        # The session ended (nothing to tell), or Temporal is out of reach: the subscription ends;
        # the resource still answers reads.
        log.info("a subscription to %s ended", uri, exc_info=True)
