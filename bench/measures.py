"""The measurements, each against a running stack: the bare business call and the same booking
through settled, side by side, so every ratio compares figures taken in the same run."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from settled.bench.floor import Floor
from settled.bench.stats import summarize

from settled.client import SettledAPIError, SettledClient, SettledError, SettledUnreachable
from settled.domain.models import ActionStatus
from settled.domain.states import State

BOOKING = {"room": "Ada", "day": "Thursday"}
REFUND = {"order_id": "o-bench", "amount": 1, "currency": "EUR"}
PARAMS = {"room_booking": BOOKING, "room_booking_on_event": BOOKING, "refund_nodedup": REFUND}
WAIT_S = 10
# Each bench action has a conversation of its own, the case that starts a second execution beside it.
CONVERSATION_OF = "conv-{op}"


def conversations_of(operation_ids: list[str]) -> list[str]:
    """The new conversation each of these actions was created in (`Run.create` without one)."""
    return [CONVERSATION_OF.format(op=op) for op in operation_ids]


@dataclass(frozen=True)
class Sizes:
    """How much of each measurement to run; `tiny` only proves that the benchmark works."""

    sequential: int = 200  # samples of the bare call and of the durable action, one at a time
    in_flight: int = 500  # actions waiting while status reads are measured
    status_reads: int = 1000
    interrupts: int = 50
    throughput_s: float = 60.0
    throughput_concurrency: int = 16
    loads: tuple[int, ...] = (10, 100, 1000)
    waiting: int = 1000  # actions waiting (on authorization) when memory is read
    idle_streams: int = 100  # open SSE streams on which nothing changes, while CPU is read
    idle_stream_s: float = 10.0
    # The bulkhead step: a degraded kind's actions requested, its service answering after this long,
    # and the healthy kind's samples alone and beside them (bench.bulkhead).
    bulkhead_degraded: int = 600
    bulkhead_answer_s: float = 30.0
    bulkhead_samples: int = 100
    # A burst from a few callers: `caller_burst` actions, `caller_burst_callers` callers each creating
    # one after another (settled and the floor alike), timed to the last one confirmed.
    caller_burst: int = 1000
    caller_burst_callers: int = 24
    # Confirmed actions (settled's and the floor's) whose histories are counted for the engine's cost.
    engine_samples: int = 20
    # Whole calls (bench.calls): through these doors, `calls` calls side by side per door and shape of
    # kind, each of `call_actions` actions.
    call_doors: tuple[str, ...] = ("adapter", "vapi", "mcp")
    calls: int = 3
    call_actions: int = 10

    @classmethod
    def tiny(cls) -> "Sizes":
        return cls(
            sequential=5,
            in_flight=10,
            status_reads=20,
            interrupts=3,
            throughput_s=2.0,
            throughput_concurrency=4,
            loads=(2, 5),
            waiting=10,
            idle_streams=5,
            idle_stream_s=2.0,
            bulkhead_degraded=20,
            bulkhead_answer_s=5.0,
            bulkhead_samples=5,
            caller_burst=20,
            caller_burst_callers=4,
            engine_samples=3,
            call_doors=("adapter",),
            calls=1,
            call_actions=1,
        )


@dataclass
class Run:
    """One benchmark run against one stack: its clients, and the operation ids it created. The API's
    client makes one request per call (no retries) on one shared pool of kept-alive connections; it
    validates each answer into an ActionStatus, some 10-20 µs more than decoding the JSON alone, against
    latencies of milliseconds."""

    api: SettledClient
    sandbox: httpx.AsyncClient
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    counter: int = 0

    def new_id(self, what: str) -> str:
        self.counter += 1
        return f"bench-{self.tag}-{what}-{self.counter}"

    async def create(
        self,
        operation_id: str,
        *,
        kind: str = "room_booking",
        authorized: bool = True,
        wait: float = WAIT_S,
        conversation_id: str | None = None,
    ) -> ActionStatus | None:
        """The action's status, or None when it was not answered within the wait, or its connection
        was dropped under a burst (a backlog: counted as unanswered, not fatal). Each action is in a
        new conversation of its own unless `conversation_id` names one."""
        try:
            return await self.api.create_action(
                conversation_id or CONVERSATION_OF.format(op=operation_id),
                kind,
                PARAMS[kind],
                operation_id=operation_id,
                authorized=authorized,
                wait=wait,
            )
        except SettledUnreachable:
            return None
        except SettledAPIError as error:
            if error.status == 503:
                return None
            raise BenchError(f"create {operation_id}: {error}") from error

    async def records(self) -> list[dict[str, Any]]:
        rows = (await self.sandbox.get("/_sandbox/records", params={"service": "bookings"})).json()
        return [row for row in rows["records"] if (row["key"] or "").startswith(f"bench-{self.tag}-")]


class BenchError(RuntimeError):
    """The stack answered something a benchmark cannot count (an error, or a wrong outcome)."""


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return (time.perf_counter() - started) * 1000, result


async def bare_call(run: Run, n: int, deduplicated: bool = True) -> list[float]:
    """The sandbox's booking endpoint (with its key), or its refund endpoint (without one), called
    directly: what the business call costs by itself."""
    samples = []
    for _ in range(n):
        key = run.new_id("bare")
        path = "/bookings" if deduplicated else "/refunds"
        body = {**(BOOKING if deduplicated else REFUND), "client_reference": key}
        headers = {"Idempotency-Key": key} if deduplicated else {}
        elapsed, response = await timed(
            lambda path=path, body=body, headers=headers: run.sandbox.post(path, json=body, headers=headers)
        )
        if response.status_code != 201:
            raise BenchError(f"bare call: {response.status_code} {response.text[:200]}")
        samples.append(elapsed)
    return samples


async def durable_action(run: Run, n: int, kind: str = "room_booking") -> list[float]:
    """The same booking (or refund) through settled, one at a time, until the business system
    confirmed it."""
    samples = []
    for _ in range(n):
        operation_id = run.new_id("durable")
        elapsed, status = await timed(lambda op=operation_id: run.create(op, kind=kind))
        if status is None or status.state is not State.CONFIRMED:
            ended = f"{status.state}: {status.reason}" if status else "unanswered"
            raise BenchError(f"{operation_id} ended {ended}")
        samples.append(elapsed)
    return samples


async def gather_limited(calls: list[Callable[[], Awaitable[Any]]], concurrency: int) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    return await asyncio.gather(*(one(call) for call in calls))


async def waiting_actions(run: Run, n: int) -> list[str]:
    """`n` actions recorded and waiting for the caller's go-ahead: open workflows, nothing sent."""
    ids = [run.new_id("waiting") for _ in range(n)]
    await gather_limited([lambda op=op: run.create(op, authorized=False, wait=0) for op in ids], 32)
    return ids


async def status_reads(run: Run, in_flight: list[str], n: int, concurrency: int = 8) -> list[float]:
    """GET /v1/actions/{id} spread over the actions in flight, a few readers at a time."""

    async def read(operation_id: str) -> float:
        try:
            elapsed, _ = await timed(lambda: run.api.get(operation_id))
        except SettledError as error:
            raise BenchError(f"status read: {error}") from error
        return elapsed

    targets = [in_flight[i % len(in_flight)] for i in range(n)]
    return await gather_limited([lambda op=op: read(op) for op in targets], concurrency)


async def status_reads_for(run: Run, in_flight: list[str], seconds: float) -> list[float]:
    """One reader, reading one action after another for `seconds` (run beside another load)."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        samples += await status_reads(run, in_flight[len(samples) % len(in_flight) :][:1], 1, 1)
    return samples


async def interrupt_to_verified(run: Run, n: int) -> list[float]:
    """An action whose answer was lost and could not be verified at once (the lookup its send's call
    made got no answer: `unknown`); the caller cuts in; how long until the channel can say the verified
    truth. Measured as a channel does it: the `interrupted` event, then a reconcile that waits for the
    lookup's answer."""
    samples = []
    for _ in range(n):
        operation_id = run.new_id("lost")
        for op, mode in (("create", "drop_after_apply"), ("lookup", "fail_before_apply")):
            fault = {"service": "bookings", "op": op, "mode": mode, "match_key": operation_id}
            (await run.sandbox.post("/_sandbox/faults", json=fault)).raise_for_status()
        status = await run.create(operation_id, kind="room_booking_on_event")
        if status is None or status.state is not State.UNKNOWN:
            got = status.state if status else "no answer"
            raise BenchError(f"{operation_id}: expected unknown after a lost answer, got {got}")
        conversation = status.conversation_id

        async def verify(op: str = operation_id, conv: str = conversation) -> ActionStatus:
            await run.api.conversation_event(conv, "interrupted", "voice")
            answer = await run.api.reconcile(op, wait=5)
            # An API that answers before the lookup did is read until it has the truth (bounded).
            deadline = time.perf_counter() + 10
            while answer.state is State.UNKNOWN and time.perf_counter() < deadline:
                await asyncio.sleep(0.01)
                answer = await run.api.get(op)
            return answer

        elapsed, verified = await timed(verify)
        if verified.state is not State.CONFIRMED:
            raise BenchError(f"{operation_id}: not verified after the interruption: {verified.state}")
        samples.append(elapsed)
    return samples


UNANSWERED = "unanswered"


async def settle(run: Run, ids: list[str], timeout_s: float = 60) -> dict[str, int]:
    """Wait (bounded) until each action has left requested/running; count the final states."""
    deadline = time.perf_counter() + timeout_s
    states: dict[str, str] = {}
    pending = list(ids)

    async def state_of(operation_id: str) -> str:
        try:
            return (await run.api.get(operation_id)).state.value
        except SettledAPIError as error:
            return f"http {error.status}"
        except SettledUnreachable:  # a kept-alive connection the API closed meanwhile: ask again
            return UNANSWERED

    while pending and time.perf_counter() < deadline:
        answers = await gather_limited([lambda op=op: state_of(op) for op in pending], 16)
        states.update(zip(pending, answers, strict=True))
        pending = [op for op in pending if states[op] in ("requested", "running", UNANSWERED)]
        if pending:
            await asyncio.sleep(0.2)  # a bounded poll of the API, not a wait in a test
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    return counts


async def throughput(run: Run, seconds: float, concurrency: int) -> dict[str, Any]:
    """Closed loop: `concurrency` callers each create-and-wait, for `seconds`. An action is counted when
    its answer says confirmed. Then every action is let settle, and the sandbox's records are checked:
    one per operation, none twice."""
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []
    ids: list[str] = []
    confirmed = 0

    async def caller() -> None:
        nonlocal confirmed
        while time.perf_counter() < deadline:
            operation_id = run.new_id("tput")
            elapsed, status = await timed(lambda op=operation_id: run.create(op))
            ids.append(operation_id)
            if status is not None and status.state is State.CONFIRMED:
                confirmed += 1
                latencies.append(elapsed)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed_s = time.perf_counter() - started
    final = await settle(run, ids)
    keys = [row["key"] for row in await run.records() if "-tput-" in row["key"]]
    return {
        "seconds": round(elapsed_s, 2),
        "concurrency": concurrency,
        "created": len(ids),
        "confirmed": confirmed,
        "per_second": round(confirmed / elapsed_s, 1),
        "final_states": final,
        "records": len(keys),
        "duplicates": len(keys) - len(set(keys)),
        "missing": len(set(ids) - set(keys)),
        "latency_ms": summarize(latencies).as_dict(),
    }


async def burst(run: Run, n: int) -> dict[str, Any]:
    """`n` actions created at once, each waiting for its confirmation: latency under that load, and
    how many were confirmed within their wait (the others answered with their current state)."""
    ids = [run.new_id(f"burst{n}") for _ in range(n)]

    async def one(operation_id: str) -> tuple[float, str]:
        elapsed, status = await timed(lambda: run.create(operation_id))
        return elapsed, status.state.value if status else "unanswered"

    answers = await asyncio.gather(*(one(op) for op in ids))
    confirmed = [elapsed for elapsed, state in answers if state == "confirmed"]
    final = await settle(run, ids)
    return {
        **summarize([elapsed for elapsed, _ in answers]).as_dict(),
        "confirmed_in_wait": len(confirmed),
        "final_states": final,
    }


async def _from_callers(
    ids: list[str], callers: int, one: Callable[[str], Awaitable[bool]]
) -> tuple[float, dict[str, float]]:
    """`callers` callers, each taking the next id and running `one` (True: confirmed), until every id
    was taken: (seconds until the last caller finished, seconds from the start to each confirmation)."""
    queue = iter(ids)
    confirmed_at: dict[str, float] = {}
    started = time.perf_counter()

    async def caller() -> None:
        for operation_id in queue:  # one iterator shared by the callers: each id is taken once
            if await one(operation_id):
                confirmed_at[operation_id] = time.perf_counter() - started

    await asyncio.gather(*(caller() for _ in range(callers)))
    return time.perf_counter() - started, confirmed_at


async def burst_from_callers(run: Run, n: int, callers: int) -> dict[str, Any]:
    """`n` actions from `callers` callers, each creating one after another with the usual wait: how many
    were accepted (answered at all, not 503 or dropped), confirmed in their wait, confirmed in the end
    and written once, and the time until the last was confirmed (for one confirmed after its wait: when
    the settling reads found it, an upper bound)."""
    ids = [run.new_id(f"callers{n}") for _ in range(n)]
    answers: dict[str, str] = {}

    async def one(operation_id: str) -> bool:
        status = await run.create(operation_id)
        answers[operation_id] = status.state.value if status else UNANSWERED
        return status is not None and status.state is State.CONFIRMED

    answered_s, confirmed_at = await _from_callers(ids, callers, one)
    started = time.perf_counter() - answered_s
    final = await settle(run, ids)
    settled_s = time.perf_counter() - started
    keys = [row["key"] for row in await run.records() if f"-callers{n}-" in row["key"]]
    last = max(confirmed_at.values(), default=0.0)
    if len(confirmed_at) < n and final.get("confirmed", 0) > len(confirmed_at):
        last = settled_s
    return {
        "actions": n,
        "callers": callers,
        "accepted": sum(state != UNANSWERED for state in answers.values()),
        "confirmed_in_wait": len(confirmed_at),
        "final_states": final,
        "records": len(keys),
        "duplicates": len(keys) - len(set(keys)),
        "answered_s": round(answered_s, 2),
        "last_confirmed_s": round(last, 2),
        "operation_ids": ids,
    }


async def floor_burst_from_callers(floor: Floor, n: int, callers: int) -> dict[str, Any]:
    """The floor's `n` from the same callers: the time until its last was done."""
    first = len(floor.ids)

    async def one(_: str) -> bool:
        await floor.action(True)
        return True

    done_s, _ = await _from_callers([str(i) for i in range(n)], callers, one)
    return {"actions": n, "callers": callers, "last_confirmed_s": round(done_s, 2), "ids": floor.ids[first:]}


async def floor_actions(floor: Floor, n: int, deduplicated: bool) -> list[float]:
    """Temporal's floor for the same step, one at a time (bench.floor)."""
    return [await floor.action(deduplicated) for _ in range(n)]


async def floor_throughput(
    floor: Floor, seconds: float, concurrency: int, deduplicated: bool
) -> dict[str, Any]:
    """The floor's closed loop with the same callers as `throughput`."""
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []

    async def caller() -> None:
        while time.perf_counter() < deadline:
            latencies.append(await floor.action(deduplicated))

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed_s = time.perf_counter() - started
    return {
        "seconds": round(elapsed_s, 2),
        "concurrency": concurrency,
        "confirmed": len(latencies),
        "per_second": round(len(latencies) / elapsed_s, 1),
        "latency_ms": summarize(latencies).as_dict(),
    }


@asynccontextmanager
async def idle_streams(run: Run, conversations: list[str], n: int) -> AsyncIterator[int]:
    """`n` SSE streams held open on conversations where nothing changes, each past its opening
    snapshot ("live"); yields how many are live, and closes them on exit."""
    live = asyncio.Semaphore(0)
    stop = asyncio.Event()

    async def hold(conversation: str) -> None:
        # On the client's own connections, but read raw: the `: live` mark that ends the opening
        # snapshot is an SSE comment, which the client's typed stream leaves out.
        path = f"/v1/conversations/{conversation}/stream"
        async with run.api.http.stream("GET", path, timeout=None) as answer:
            async for line in answer.aiter_lines():
                if line.startswith(": live"):
                    live.release()
                    await stop.wait()
                    return

    tasks = [asyncio.create_task(hold(conversations[i % len(conversations)])) for i in range(n)]
    try:
        async with asyncio.timeout(60):
            for _ in range(n):
                await live.acquire()
        yield n
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
