"""`tools/list` and `tools/call`: the adapters' tool set from the kinds the API serves, answered with
the adapters' truthful text (`settled.adapters.common`) and the ActionStatus as structured content.

One call is one action under the adapters' rules: its operation id is derived from the conversation,
the kind and the canonical params (`SettledChannel.request`), so a repeated call, a client's retry or a
reconnect meets the same durable action and nothing is written twice. A call waits at most
`SETTLED_MCP_WAIT_S` for a verified outcome, reporting each state it passes to a client that sent a
progress token; past the wait it answers that the request is not confirmed yet, and the action's
resource (`settled://actions/{operation_id}`) tells the rest. The create (and a go-ahead) carries that
wait, as any adapter's does: with a caller waiting, a kind that can send inside the workflow task
does (one task, no activity), and the states it passed are reported from its record. `isError` is set
only when settled refused the call (an unknown tool, invalid params or no conversation; the text
names what is wrong): a failed or cancelled action is a true answer."""

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from settled.adapters.common import (
    AUTHORIZE_TOOL,
    CHECK_TOOL,
    ActionKind,
    SettledChannel,
    check_answer,
    error_answer,
    tool_answer,
)
from settled.adapters.common import tool_set as adapter_tool_set
from settled.api.edges.inprocess import edge_client, offered_kinds
from settled.api.edges.mcp import go_ahead
from settled.api.edges.mcp.caller import Caller
from settled.api.edges.mcp.watch import Watch
from settled.gateway.gateway import GatewayError

from settled.client import SettledAPIError, SettledError
from settled.domain.models import ActionStatus, HistoryEntry
from settled.domain.states import IN_PROGRESS, State

# Refusals of the API that are the caller's to fix: the text names the field.
_REFUSED = frozenset({"invalid_params", "invalid_request", "not_found", "operation_conflict"})
_STATUS_SCHEMA = ActionStatus.model_json_schema()
_STATUSES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "actions": {"type": "array", "items": {k: v for k, v in _STATUS_SCHEMA.items() if k != "$defs"}}
    },
    "required": ["actions"],
    "$defs": _STATUS_SCHEMA.get("$defs", {}),
}
_ACTION = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)
_CHECK = types.ToolAnnotations(read_only_hint=True, open_world_hint=True)


def tool_set(kinds: list[ActionKind]) -> list[types.Tool]:
    """The adapters' tool set (`settled.adapters.common.tool_set`) as MCP tools: each with the schema
    of what it answers, and hints that say which tools change the world."""
    tools = []
    for spec in adapter_tool_set(kinds):
        checks = spec.name == CHECK_TOOL
        tools.append(
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.parameters,
                output_schema=_STATUSES_SCHEMA if checks else _STATUS_SCHEMA,
                annotations=_CHECK if checks else _ACTION,
            )
        )
    return tools


def refused(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def answered(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


class Tools:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._tools: list[types.Tool] | None = None

    @property
    def kinds(self) -> list[ActionKind]:
        return offered_kinds(self.app)

    @property
    def tools(self) -> list[types.Tool]:
        if self._tools is None:  # the kinds the API serves are fixed for its life
            self._tools = tool_set(self.kinds)
        return self._tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return next((tool.input_schema for tool in self.tools if tool.name == name), None)

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        kinds = {kind.name: kind for kind in self.kinds}
        names = [tool.name for tool in self.tools]
        if params.name not in names:
            return refused(f"There is no tool {params.name!r}; the tools are: {', '.join(names)}.")
        caller = Caller.of(ctx)
        if (problem := caller.conversation_problem()) is not None:
            return refused(problem)
        assert caller.conversation_id is not None
        arguments = params.arguments or {}
        wait_s: float = self.app.state.settings.mcp_wait_s
        async with edge_client(self.app, caller.api_key(self.app)) as client:
            # Every call carries the wait to the API (a check's reconcile, a request's create, a
            # go-ahead): the workflow knows its caller waits, so a send may run inside its task. What
            # is left of the wait then follows the action itself, to report each state it passes.
            channel = SettledChannel(
                client, caller.conversation_id, list(kinds.values()), channel="text", wait_s=wait_s
            )
            try:
                if params.name == CHECK_TOOL:
                    return await self._check(channel, arguments)
                if params.name == AUTHORIZE_TOOL:
                    operation_id = arguments.get("operation_id")
                    if not isinstance(operation_id, str) or not operation_id:
                        return refused("Not authorized: operation_id (op_...) is required. Nothing was sent.")
                    waited = _Waited(wait_s)
                    status = await channel.authorize(operation_id)
                    return await self._outcome(ctx, caller, channel, status, waited.left())
                return await self._request(ctx, params, caller, channel, kinds[params.name], wait_s)
            except SettledAPIError as error:
                if error.code in _REFUSED:
                    return refused(error_answer(error) if error.code != "not_found" else error.message)
                raise MCPError(types.INTERNAL_ERROR, error_answer(error)) from None
            except SettledError as error:
                raise MCPError(types.INTERNAL_ERROR, error_answer(error)) from None

    async def _check(self, channel: SettledChannel, arguments: dict[str, Any]) -> types.CallToolResult:
        operation_id = arguments.get("operation_id") or None
        if operation_id is not None and not isinstance(operation_id, str):
            return refused("Not checked: operation_id must be a string (op_...).")
        statuses = await channel.check(operation_id)
        return answered(check_answer(statuses), {"actions": [_json(status) for status in statuses]})

    async def _request(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        caller: Caller,
        channel: SettledChannel,
        kind: ActionKind,
        wait_s: float,
    ) -> types.CallToolResult | types.InputRequiredResult:
        waited = _Waited(wait_s)
        arguments = params.arguments or {}
        status = await _asked_already(channel, kind, params) or await channel.request(kind.name, arguments)
        lead = ""
        if status.state is State.REQUESTED and not status.authorized and go_ahead.can_ask(ctx):
            answer = await go_ahead.ask(ctx, params, kind, status)
            if isinstance(answer, types.InputRequiredResult):
                return answer
            if answer is go_ahead.Answer.YES:
                waited = _Waited(wait_s)  # the person answered: the wait for the send starts now
                status = await channel.client.authorize(status.operation_id, by=go_ahead.BY, wait=wait_s)
            else:
                lead = go_ahead.NOT_GIVEN[answer] + " "
        return await self._outcome(ctx, caller, channel, status, waited.left(), lead)

    async def _outcome(
        self,
        ctx: ServerRequestContext[Any, Any],
        caller: Caller,
        channel: SettledChannel,
        status: ActionStatus,
        wait_s: float,
        lead: str = "",
    ) -> types.CallToolResult:
        status = await self._followed(ctx, caller, status, wait_s)
        authorize_tool = AUTHORIZE_TOOL if channel.needs_authorize_tool else None
        return answered(lead + tool_answer(status, authorize_tool), _json(status))

    async def _followed(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, status: ActionStatus, wait_s: float
    ) -> ActionStatus:
        """The status once it is out of requested/running (or waits on the caller's go-ahead), or as it
        is when the wait ends; a progress notification for each state passed (a no-op without a token):
        those the answered status passed while the call that carried the wait waited, from its record,
        then each one the action passes while it is followed."""
        passed = 0

        async def note(message: str) -> None:
            nonlocal passed
            passed += 1
            await ctx.session.report_progress(passed, None, message)

        async def report(state: ActionStatus) -> None:
            await note(f"{state.state.value}: {state.say}")

        for entry in _passed_before(status):
            await note(f"{entry.state.value}: {entry.note}")
        await report(status)
        if not _waiting(status):
            return status
        try:
            return await self._follow(report, caller, status, wait_s)
        except GatewayError:
            return status  # Temporal out of reach while following: the action is durable as answered

    async def _follow(
        self,
        report: Callable[[ActionStatus], Awaitable[None]],
        caller: Caller,
        status: ActionStatus,
        wait_s: float,
    ) -> ActionStatus:
        watch = await Watch.start(self.app, caller.tenant, status.operation_id)
        if watch.now is not None and watch.now.updated_at > status.updated_at:  # changed meanwhile
            if watch.now.state is not status.state:
                await report(watch.now)
            status = watch.now
            if not _waiting(status):
                return status
        try:
            async with asyncio.timeout(wait_s), aclosing(watch.changes()) as changes:
                async for change in changes:
                    if change.updated_at < status.updated_at:
                        continue
                    if change.state is not status.state:
                        await report(change)
                    status = change
                    if not _waiting(status):
                        break
        except TimeoutError:
            pass
        return status


async def _asked_already(
    channel: SettledChannel, kind: ActionKind, params: types.CallToolRequestParams
) -> ActionStatus | None:
    """In the call that brings the answer to the go-ahead question (2026-07-28: the client calls the
    tool again), the action the first call recorded, read (a status read costs no Temporal Action)
    rather than created again (an update and a signal); None where it is not that action, waiting for
    its go-ahead in this conversation, and the call then creates or meets it as any call does."""
    if go_ahead.GO_AHEAD not in (params.input_responses or {}):
        return None
    operation_id = channel.operation_ids(channel.conversation_id, kind.kind, params.arguments or {}, 1)
    try:
        status = await channel.client.get(operation_id)
    except SettledAPIError as error:
        if error.code == "not_found":
            return None
        raise
    mine = status.conversation_id == channel.conversation_id and status.kind == kind.kind
    return status if mine and status.state is State.REQUESTED and not status.authorized else None


class _Waited:
    """What is left of a tool call's wait, from the call that carried it."""

    def __init__(self, wait_s: float) -> None:
        self._ends = asyncio.get_running_loop().time() + wait_s

    def left(self) -> float:
        return max(0.0, self._ends - asyncio.get_running_loop().time())


def _passed_before(status: ActionStatus) -> list[HistoryEntry]:
    """The states the action passed before its current one, oldest first, one entry per state."""
    passed: list[HistoryEntry] = []
    for entry in status.history:
        if passed and passed[-1].state is entry.state:
            passed[-1] = entry
        else:
            passed.append(entry)
    if passed and passed[-1].state is status.state:
        passed.pop()
    return passed


def _waiting(status: ActionStatus) -> bool:
    """Whether the action is on its way without anyone's say: authorized and requested or running."""
    return status.state in IN_PROGRESS and status.authorized


def _json(status: ActionStatus) -> dict[str, Any]:
    return status.model_dump(mode="json")
