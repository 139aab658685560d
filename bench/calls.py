"""What a whole call costs on Temporal Cloud, per confirmed action: every Action the call's histories
recorded (bench.actions), plus the queries the API sent meanwhile, and the active storage its histories
take (bench.storage), for each door a call comes through and each shape of kind.

A door is driven as its real users drive it: an adapter session (`SettledChannel`: the channel opened,
each action created, the confirmation spoken to its end and reported `presented`, the channel closed,
then the text channel's handoff read); Vapi's Server URL (a `tool-calls` message per action, then the
`end-of-call-report`); MCP (a `tools/call` over /mcp with the `mcp` package's own client). Each call
carries `call_actions` actions, so the call's own Actions (its conversation's start, its channel's
events, the handoff read) are shared among them, as in a real call.
"""

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import httpx2
import mcp_types
from mcp import Client as McpClient
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from settled.adapters.channel import SettledChannel
from settled.adapters.tools import AUTHORIZE_TOOL, ActionKind, derived_operation_id
from settled.bench import actions, storage
from settled.bench.measures import BenchError, Run
from temporalio.client import Client

from settled.domain.kinds import PLAIN_BOOKING_PARAMS, PLAIN_REFUND_PARAMS, Kinds, Variant
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.temporal.identity import action_workflow_id, conversation_workflow_id

DOORS = ("adapter", "vapi", "mcp")
CONFIRMED_WITHIN_S = 60.0


@dataclass(frozen=True)
class Shape:
    """A shape of kind: which kind, what it is, and how its actions are driven to `confirmed`."""

    kind: str
    about: str
    params: Callable[[str], dict[str, Any]]
    schema: dict[str, Any]
    lost_answer: bool = False  # the service applies the write and its answer is lost: a lookup confirms it
    go_ahead: bool = False  # created waiting for the caller's go-ahead, then authorized


def _booking(unique: str) -> dict[str, Any]:
    return {"room": f"room-{unique}", "day": "2027-01-15"}


def _refund(unique: str) -> dict[str, Any]:
    return {"order_id": f"order-{unique}", "amount": 12.5, "currency": "EUR"}


# The one kind of the shapes beside the bench's own (bench.runner.BENCH_KINDS; each kind is polled on a
# task queue of its own, so the bench adds no more than it needs): the sandbox booking as shipped but
# without its go-ahead, with a lookup and a commit horizon, the shape of a real payments or booking API.
CALL_KINDS: dict[str, Variant] = {
    "booking_with_horizon": Variant(
        "room_booking", {"say": None, "params_schema": PLAIN_BOOKING_PARAMS, "requires_authorization": None}
    ),
}
SHAPES: dict[str, Shape] = {
    # The bench's own booking (a deduplicating write with an authoritative lookup, no commit horizon),
    # without a go-ahead: sent inside the workflow task while a caller waits for it.
    "local_activity": Shape(
        "room_booking_on_event", "the bench's own shape: sent inside the workflow task", _booking,
        PLAIN_BOOKING_PARAMS,
    ),
    "activity": Shape(
        "refund_nodedup", "a regular activity: a service that does not deduplicate", _refund,
        PLAIN_REFUND_PARAMS,
    ),
    "lookup_horizon": Shape(
        "booking_with_horizon", "a lookup and a commit horizon, the answer lost: unknown, then the "
        "lookup confirms", _booking, PLAIN_BOOKING_PARAMS, lost_answer=True,
    ),
    "go_ahead": Shape(
        "room_booking", "the bench's own booking with its go-ahead: requested, then authorized", _booking,
        PLAIN_BOOKING_PARAMS,
        go_ahead=True,
    ),
}  # fmt: skip


@dataclass
class Door:
    """What a door's calls need: the API (settled's client and plain HTTP), the sandbox, Temporal."""

    run: Run
    api_http: httpx.AsyncClient
    api_url: str
    temporal: Client
    serial: Iterator[int]

    def unique(self) -> str:
        return f"{self.run.tag}-{next(self.serial)}"

    async def lose_answer(self, operation_id: str) -> None:
        """The service will apply this write and drop its connection before answering."""
        spec = {"service": "bookings", "op": "create", "mode": "drop_after_apply", "match_key": operation_id}
        response = await self.run.sandbox.post("/_sandbox/faults", json=spec)
        if response.status_code != 201:
            raise BenchError(f"the sandbox refused the fault: {response.text}")

    async def confirmed(self, operation_id: str, shape: Shape) -> ActionStatus:
        """The action once confirmed (its state read from the API: a status read costs no Action);
        for a lost answer, only once it went through `unknown`."""
        deadline = time.monotonic() + CONFIRMED_WITHIN_S
        while True:
            status = await self.run.api.get(operation_id)
            if status.state is State.CONFIRMED:
                if shape.lost_answer and State.UNKNOWN not in {entry.state for entry in status.history}:
                    raise BenchError(f"{operation_id}: confirmed without its answer lost")
                return status
            if status.state in (State.FAILED, State.CANCELLED) or time.monotonic() > deadline:
                raise BenchError(f"{operation_id}: not confirmed ({status.state})")
            await asyncio.sleep(0.1)  # polling the status (free) until confirmed, with a deadline


def _action_kind(shape: Shape) -> ActionKind:
    return ActionKind(shape.kind, shape.about, shape.schema, requires_authorization=shape.go_ahead)


async def adapter_call(door: Door, shape: Shape, n: int) -> tuple[str, list[str]]:
    """An adapter session: opened, each action created (and authorized), its confirmation spoken to its
    end, closed; then the text channel reads the handoff."""
    conversation = f"bench-call-{door.unique()}"
    channel = SettledChannel(
        door.run.api, conversation, [_action_kind(shape)], authorize_on_call=not shape.go_ahead, wait_s=5
    )
    channel.opened()
    for i in range(n):
        params = shape.params(door.unique())
        if shape.lost_answer:
            await door.lose_answer(derived_operation_id(conversation, shape.kind, params))
        status = await channel.request(shape.kind, params)
        if shape.go_ahead:
            await channel.authorize(status.operation_id)
        status = await door.confirmed(status.operation_id, shape)
        channel.told(status)
        spoken = f"{status.say} {status.business_ref or ''}"
        channel.utterance(f"confirmation-{i}", spoken, heard=True, generated_at=time.time())
    channel.closed()
    await channel.aclose()
    await door.run.api.handoff(conversation)
    return conversation, channel.operations


def _vapi_message(call_id: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"message": {**message, "call": {"id": call_id, "orgId": "org-bench", "type": "webCall"}}}


async def vapi_call(door: Door, shape: Shape, n: int) -> tuple[str, list[str]]:
    """Vapi's Server URL: a `tool-calls` message per action (and one for its go-ahead), then the
    `end-of-call-report` that closes the call's voice channel."""
    call_id = f"bench-{door.unique()}"
    conversation = f"vapi:{call_id}"

    async def tool_call(name: str, arguments: dict[str, Any]) -> None:
        call = {"id": f"tc-{door.unique()}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        body = _vapi_message(call_id, {"type": "tool-calls", "toolCallList": [call]})
        response = await door.api_http.post("/v1/platforms/vapi", json=body, timeout=30)
        if response.status_code != 200:
            raise BenchError(f"vapi tool-calls: {response.status_code} {response.text}")

    operations = []
    for _ in range(n):
        params = shape.params(door.unique())
        operation_id = derived_operation_id(conversation, shape.kind, params)
        if shape.lost_answer:
            await door.lose_answer(operation_id)
        await tool_call(shape.kind, params)
        if shape.go_ahead:
            await tool_call(AUTHORIZE_TOOL, {"operation_id": operation_id})
        await door.confirmed(operation_id, shape)
        operations.append(operation_id)
    report = {"type": "end-of-call-report", "endedReason": "customer-ended-call"}
    response = await door.api_http.post("/v1/platforms/vapi", json=_vapi_message(call_id, report), timeout=30)
    if response.status_code != 200:
        raise BenchError(f"vapi end-of-call-report: {response.status_code} {response.text}")
    return conversation, operations


async def _go_ahead(context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
    """The person says yes when asked for the go-ahead."""
    return mcp_types.ElicitResult(action="accept", content={"go_ahead": True})


async def mcp_call(door: Door, shape: Shape, n: int) -> tuple[str, list[str]]:
    """MCP: a `tools/call` per action over /mcp (the go-ahead asked by elicitation and given)."""
    conversation = f"bench-mcp-{door.unique()}"
    operations = []
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=40))
        transport = streamable_http_client(
            f"{door.api_url}/mcp?conversation={conversation}", http_client=http
        )
        client = McpClient(transport, mode="auto", elicitation_callback=_go_ahead, cache=None)
        await stack.enter_async_context(client)
        for _ in range(n):
            params = shape.params(door.unique())
            operation_id = derived_operation_id(conversation, shape.kind, params)
            if shape.lost_answer:
                await door.lose_answer(operation_id)
            result = await client.call_tool(shape.kind, params)
            if result.is_error:
                raise BenchError(f"mcp tools/call {shape.kind}: {result.content}")
            await door.confirmed(operation_id, shape)
            operations.append(operation_id)
    return conversation, operations


CALLS: dict[str, Callable[[Door, Shape, int], Awaitable[tuple[str, list[str]]]]] = {
    "adapter": adapter_call,
    "vapi": vapi_call,
    "mcp": mcp_call,
}


async def whole_calls(
    door: Door, kinds: Kinds, metrics_url: str, doors: tuple[str, ...], calls: int, per_call: int
) -> dict[str, Any]:
    """Per door and shape, `calls` calls of `per_call` actions each, run side by side: their Actions per
    confirmed action by kind, and the active storage of their histories. Rows run one after another
    (the query count is the server's)."""
    rows: dict[str, Any] = {}
    queries_before = await actions.queries_so_far(door.temporal, metrics_url)
    for door_name, (shape_name, shape) in itertools.product(doors, SHAPES.items()):
        made = await asyncio.gather(*(CALLS[door_name](door, shape, per_call) for _ in range(calls)))
        queries_after = await actions.queries_so_far(door.temporal, metrics_url)
        queries, queries_before = queries_after - queries_before, queries_after
        conversations = [conversation for conversation, _ in made]
        action_ids = [action_workflow_id(None, op) for _, ops in made for op in ops]
        conversation_ids = [conversation_workflow_id(None, c) for c in conversations]
        billed = await actions.billed_in_histories(door.temporal, action_ids + conversation_ids)
        billed.counts["query"] += queries
        spec = kinds.get(shape.kind)
        if spec is None:
            raise BenchError(f"the stack has no kind {shape.kind}")
        # Runs of the current revision close this long after the action settled.
        lingers = timedelta(seconds=spec.close_after_settled_s)
        stored_actions = [await storage.stored(door.temporal, wid, lingers) for wid in action_ids]
        stored_conversations = [
            await storage.stored(door.temporal, wid, await storage.idle_period(door.temporal, wid))
            for wid in conversation_ids
        ]
        rows[f"{door_name}/{shape_name}"] = {
            "door": door_name,
            "shape": shape_name,
            "kind": shape.kind,
            "actions": len(action_ids),
            "calls": calls,
            "billed": billed.per(len(action_ids)),
            "storage": storage.per_action(stored_actions, stored_conversations),
        }
    return rows
