"""The soak: its own stack on free ports, a seeded plan of actions with faults and channel events,
every answer recorded with its time, then the verdict from the sandbox's records.

Only loopback traffic; every loop is bounded in count and time, and the run stops by itself.
"""

import asyncio
import contextlib
import json
import os
import platform
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from settled.sandbox.truth import SETTLED_STATES, Observation, judge
from settled.soak.plan import KINDS, ActionPlan, Event, make_plan, planned_events, planned_faults

from settled.client import CreatedAction, SettledAPIError, SettledClient, SettledError
from settled.domain.handoff import Handoff
from settled.domain.kinds import PLAIN_BOOKING_PARAMS, PLAIN_REFUND_PARAMS, Variant
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.runtime.stack import Stack

# The soak's kinds: the sandbox services, one compensable deduplicating kind, one deduplicating kind
# that cannot be reversed, and one without deduplication. Fast reconciliation, so a run of a minute
# sees many lookups; short connect retries, so nothing waits long on a backoff.
_FAST: dict[str, Any] = {
    "timeout_s": 1.0,
    "commit_horizon_s": 3.0,
    "reconcile_initial_interval_s": 0.2,
    "reconcile_max_interval_s": 2.0,
    "connect_retry_max_interval_s": 2.0,
    "say": None,
}
SOAK_KINDS: dict[str, Variant] = {
    "room_booking": Variant("room_booking", {**_FAST, "params_schema": PLAIN_BOOKING_PARAMS}),
    "refund": Variant("refund", {**_FAST, "params_schema": PLAIN_REFUND_PARAMS}),
    "refund_nodedup": Variant(
        "refund",
        {
            **_FAST,
            "params_schema": PLAIN_REFUND_PARAMS,
            "requires_authorization": False,
            "idempotency_header": None,
        },
    ),
}
T = TypeVar("T")
REQUEST_TIMEOUT_S = 15.0
SETTLE_ROUND_S = 0.5
CREATE_TRIES = 3


@dataclass
class SoakConfig:
    actions: int = 100
    concurrency: int = 100
    duration_s: float = 20.0
    seed: int = 1
    poll_s: float = 1.5  # a live action's status is first read about this often, then less
    settle_timeout_s: float = 90.0
    data_dir: Path | None = None  # default: a temporary folder, removed after a clean run
    report: Path | None = None
    progress: bool | None = None  # None: a live display when stdout is a terminal


@dataclass
class Tally:
    """Everything the run saw, as it happened."""

    observations: list[Observation] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latency_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    faults_added: dict[str, str] = field(default_factory=dict)  # sandbox fault id -> op:mode
    started: int = 0
    finished: int = 0
    most_live: int = 0  # the most action scripts running at once
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # operation id -> latest status

    def observe(self, status: dict[str, Any], sent: float, received: float, route: str) -> None:
        self.observations.append(Observation.of(status, sent, received, route))
        previous = self.last.get(status["operation_id"])
        if previous is None or previous["_received"] <= received:
            self.last[status["operation_id"]] = {**status, "_received": received}


class Driver:
    def __init__(self, api: SettledClient, sandbox: httpx.AsyncClient, tally: Tally) -> None:
        self.api, self.sandbox, self.tally = api, sandbox, tally

    async def call(self, route: str, request: Callable[[], Awaitable[T]]) -> T | SettledError:
        """One API request through the client; every ActionStatus in its answer is recorded with the
        request's interval. A failure is counted (by its HTTP status, or as an error) and returned."""
        tally = self.tally
        tally.requests[route] += 1
        sent, started = time.time(), time.monotonic()
        try:
            answer = await request()
        except SettledAPIError as error:
            tally.latency_ms[route].append((time.monotonic() - started) * 1000)
            tally.statuses[f"{route} {error.status}"] += 1
            return error
        except SettledError as error:  # no answer: refused, reset or timed out
            tally.errors[f"{route}: {error.code}"] += 1
            return error
        received = time.time()
        tally.latency_ms[route].append((time.monotonic() - started) * 1000)
        tally.statuses[f"{route} {_success_status(answer)}"] += 1
        for status in answer.actions if isinstance(answer, Handoff) else [answer]:
            if isinstance(status, ActionStatus):
                tally.observe(status.model_dump(mode="json"), sent, received, route)
        return answer

    async def add_fault(self, body: dict[str, Any], label: str) -> str | None:
        try:
            response = await self.sandbox.post("/_sandbox/faults", json=body)
        except httpx.HTTPError as error:
            self.tally.errors[f"fault: {type(error).__name__}"] += 1
            return None
        if response.status_code != 201:
            self.tally.errors[f"fault: {response.status_code}"] += 1
            return None
        fault_id: str = response.json()["id"]
        self.tally.faults_added[fault_id] = label
        return fault_id

    async def release_later(self, fault_id: str, after_s: float) -> None:
        await asyncio.sleep(after_s)
        try:
            await self.sandbox.post(f"/_sandbox/faults/{fault_id}/release")
        except httpx.HTTPError as error:
            self.tally.errors[f"release: {type(error).__name__}"] += 1

    # -- one action ----------------------------------------------------------------------------

    async def drive(self, plan: ActionPlan, began: float, slots: asyncio.Semaphore) -> None:
        await asyncio.sleep(max(0.0, began + plan.start_s - time.monotonic()))
        async with slots:
            tally = self.tally
            tally.started += 1
            tally.most_live = max(tally.most_live, tally.started - tally.finished)
            releases = []
            for fault in plan.faults:
                label = fault.label
                fault_id = await self.add_fault(fault.body(plan.service, plan.operation_id), label)
                if fault_id and fault.release_after_s is not None:
                    releases.append(asyncio.create_task(self.release_later(fault_id, fault.release_after_s)))
            created = time.monotonic()
            await self.create(plan)
            for event in plan.events:
                await asyncio.sleep(max(0.0, created + event.at_s - time.monotonic()))
                await self.event(plan, event)
            await asyncio.gather(*releases)
            self.tally.finished += 1

    async def create(self, plan: ActionPlan) -> None:
        # A client whose create went unanswered retries with the same operation id, as
        # settled.client does (here counted apart): the repeat must meet the same action.
        for attempt in range(CREATE_TRIES):
            route = "create" if attempt == 0 else "create:retry"
            created = await self.call(
                route,
                lambda: self.api.create_action(
                    plan.conversation_id,
                    plan.kind,
                    plan.params,
                    operation_id=plan.operation_id,
                    authorized=plan.authorized,
                    wait=plan.create_wait_s,
                ),
            )
            unanswered = isinstance(created, SettledError) and created.status in (None, 503)
            if not unanswered:
                return

    async def event(self, plan: ActionPlan, event: Event) -> None:
        api, op, conversation = self.api, plan.operation_id, plan.conversation_id
        if event.type == "get":
            await self.call("get", lambda: api.get(op))
        elif event.type == "authorize":
            await self.call("authorize", lambda: api.authorize(op, wait=1))
        elif event.type == "cancel":
            await self.call("cancel", lambda: api.cancel(op, wait=1))
        elif event.type == "reconcile":
            await self.call("reconcile", lambda: api.reconcile(op, wait=1))
        elif event.type == "presented":
            said = self.tally.last.get(op, {}).get("say") or "Let me check on that."
            completed = int(event.at_s * 1000) % 2 == 0  # seeded through the plan's timing
            await self.call("presented", lambda: api.presented(op, "voice", said, completed))
        elif event.type == "handoff":
            await self.call("handoff", lambda: api.handoff(conversation))
        else:
            channel, reason = {
                "interrupted": ("voice", None),
                "channel_closed": ("voice", "dropped"),
                "channel_opened": ("text", None),
            }[event.type]
            await self.call(
                event.type, lambda: api.conversation_event(conversation, event.type, channel, reason)
            )

    # -- the end -------------------------------------------------------------------------------

    async def settle(self, plans: list[ActionPlan], timeout_s: float) -> list[dict[str, Any]]:
        """Faults off, then bring every action to a settled state (bounded), and read each one last."""
        await self.sandbox.delete("/_sandbox/faults")
        by_id = {plan.operation_id: plan for plan in plans}
        deadline = time.monotonic() + timeout_s
        final: dict[str, dict[str, Any]] = {}
        pending = list(by_id)
        while pending and time.monotonic() < deadline:
            answers = await asyncio.gather(*(self.settle_one(by_id[op]) for op in pending))
            for op, status in zip(pending, answers, strict=True):
                if status is not None:
                    final[op] = status
            pending = [op for op in pending if not _at_rest(final.get(op), by_id[op])]
            if pending:
                await asyncio.sleep(SETTLE_ROUND_S)
        # What never came to rest is judged as such (an `unsettled` violation), not by its last state.
        return [
            final[op] if op in final and op not in pending else {"operation_id": op, "state": "not at rest"}
            for op in by_id
        ]

    async def settle_one(self, plan: ActionPlan) -> dict[str, Any] | None:
        api, op = self.api, plan.operation_id
        status = await self.call("settle:get", lambda: api.get(op))
        if isinstance(status, SettledError):
            return None
        after: ActionStatus | SettledError | None = None
        if status.state is State.REQUESTED and not status.authorized:
            if plan.authorize_at_end:
                after = await self.call("settle:authorize", lambda: api.authorize(op))
            else:
                after = await self.call("settle:cancel", lambda: api.cancel(op))
        elif status.state in (State.RUNNING, State.UNKNOWN):
            after = await self.call("settle:reconcile", lambda: api.reconcile(op, wait=1))
        return (after if isinstance(after, ActionStatus) else status).model_dump(mode="json")


def _success_status(answer: object) -> int:
    """The HTTP status of a successful answer: the client answers models, and the contract gives each
    route one success status (a create 201, or 200 for a repeated operation id; an event 202)."""
    if isinstance(answer, CreatedAction):
        return 201 if answer.created else 200
    return 202 if isinstance(answer, dict) else 200


def _at_rest(status: dict[str, Any] | None, plan: ActionPlan) -> bool:
    """Settled, and no reversal under way: a cancelled booking stays `confirmed` (cancel_requested)
    while its compensation runs, and ends `cancelled` (compensated) or `confirmed` with a reason."""
    if status is None or status["state"] not in SETTLED_STATES:
        return False
    reversing = (
        KINDS[plan.kind].compensable
        and status["state"] == "confirmed"
        and status["cancel_requested"]
        and not status["reason"]
    )
    return not reversing


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {}
    ordered = sorted(samples)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)  # noqa: E731
    return {"p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99), "max": round(ordered[-1], 1)}


async def _progress(tally: Tally, total: int, stop: asyncio.Event) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]soak"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[line]}"),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("actions", total=total, line="")
        while not stop.is_set():
            live = tally.started - tally.finished
            line = (
                f"live {live} · requests {sum(tally.requests.values())} · answers {len(tally.observations)}"
                f" · errors {sum(tally.errors.values())}"
            )
            progress.update(task, completed=tally.finished, line=line)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
        progress.update(task, completed=tally.finished)


async def _fired_faults(sandbox: httpx.AsyncClient, added: dict[str, str]) -> dict[str, int]:
    rows = (await sandbox.get("/_sandbox/requests")).json()["requests"]
    return dict(Counter(added.get(row["fault"], row["fault"]) for row in rows if row.get("fault")))


async def soak_against(
    api_url: str, sandbox_url: str, config: SoakConfig, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run the plan against a running stack; returns the report (violations included)."""
    plans = make_plan(config.seed, config.actions, config.duration_s, config.concurrency, config.poll_s)
    tally = Tally()
    limits = httpx.Limits(
        max_connections=config.concurrency + 50, max_keepalive_connections=config.concurrency
    )
    show = config.progress if config.progress is not None else os.isatty(1)
    async with (
        httpx.AsyncClient(base_url=api_url, limits=limits) as api_http,
        httpx.AsyncClient(base_url=sandbox_url, timeout=REQUEST_TIMEOUT_S, limits=limits) as sandbox,
    ):
        # No retries inside the client: the soak retries a create itself, and counts every request.
        api = SettledClient(api_url, timeout_s=REQUEST_TIMEOUT_S, retries=0, http=api_http)
        driver = Driver(api, sandbox, tally)
        stop = asyncio.Event()
        display = asyncio.create_task(_progress(tally, len(plans), stop)) if show else None
        began, began_wall = time.monotonic(), time.time()
        slots = asyncio.Semaphore(config.concurrency)
        await asyncio.gather(*(driver.drive(plan, began, slots) for plan in plans))
        load_s = time.monotonic() - began
        say(f"soak: {len(plans)} actions driven in {load_s:.1f}s; settling")
        final = await driver.settle(plans, config.settle_timeout_s)
        settle_s = time.monotonic() - began - load_s
        stop.set()
        if display is not None:
            await display
        rows = (await sandbox.get("/_sandbox/records")).json()["records"]
        fired = await _fired_faults(sandbox, tally.faults_added)
        writes = (await sandbox.get("/_sandbox/requests", params={"op": "create"})).json()["requests"]
    ids = [plan.operation_id for plan in plans]
    verdict = judge(tally.observations, final, rows, ids)
    counts = Counter(v.kind for v in verdict.violations)
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.system(),
        },
        "started_at": datetime.fromtimestamp(began_wall, UTC).isoformat(timespec="seconds"),
        "load_phase_s": round(load_s, 1),
        "most_live_actions": tally.most_live,
        "settle_phase_s": round(settle_s, 1),
        "actions": len(plans),
        "conversations": len({plan.conversation_id for plan in plans}),
        "kinds": dict(Counter(plan.kind for plan in plans)),
        "requests": dict(tally.requests),
        "api_requests": sum(tally.requests.values()),
        "answers": len(tally.observations),
        "claims": verdict.claims,
        "http_statuses": dict(tally.statuses),
        "errors": dict(tally.errors),
        "latency_ms": {route: _percentiles(samples) for route, samples in sorted(tally.latency_ms.items())},
        "faults_planned": planned_faults(plans),
        "faults_injected": len(tally.faults_added),
        "faults_fired": fired,
        "faults_fired_total": sum(fired.values()),
        "events": planned_events(plans),
        "final_states": dict(
            Counter(f"{s['state']}{' (compensated)' if s.get('compensated') else ''}" for s in final)
        ),
        "business_writes": len([row for row in writes if row.get("client_reference") in set(ids)]),
        "records": sum(1 for row in rows if row.get("client_reference") in set(ids)),
        "duplicates": counts.get("duplicate", 0),
        "false_done": counts.get("false_done", 0),
        "false_not_done": counts.get("false_not_done", 0),
        "final_mismatches": counts.get("final_mismatch", 0),
        "unsettled": counts.get("unsettled", 0),
        "stale_done_while_reversing": verdict.stale_done_while_reversing,
        "violation_count": len(verdict.violations),
        "violations": [v.as_json() for v in verdict.violations],
    }


def run_soak(config: SoakConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Start a stack of its own, soak it, stop it; write and return the report."""
    temporary = config.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="settled-soak-")) if temporary else Path(config.data_dir)
    started = time.monotonic()
    with Stack.on_free_ports(data_dir, SOAK_KINDS, ui=False).running() as stack:
        say(f"soak: stack up in {time.monotonic() - started:.1f}s (logs in {data_dir / 'logs'})")
        report = asyncio.run(soak_against(stack.api_url, stack.sandbox_url, config, say))
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    if config.report is not None:
        config.report.parent.mkdir(parents=True, exist_ok=True)
        config.report.write_text(json.dumps(report, indent=2) + "\n")
    if temporary and report["violation_count"] == 0:
        shutil.rmtree(data_dir, ignore_errors=True)
    else:
        report["data_dir"] = str(data_dir)
    return report


def summary(report: dict[str, Any]) -> str:
    r = report
    return (
        f"{r['actions']} actions ({r['most_live_actions']} live at most), {r['api_requests']} API requests,"
        f" {r['answers']} answers checked ({r['claims']}),"
        f" {r['faults_fired_total']} faults fired of {r['faults_injected']} injected,"
        f" final {r['final_states']}; duplicates {r['duplicates']}, false done {r['false_done']},"
        f" false not-done {r['false_not_done']}, final mismatches {r['final_mismatches']},"
        f" unsettled {r['unsettled']}; {r['elapsed_s']}s in all"
        f" (load {r['load_phase_s']}s, settle {r['settle_phase_s']}s)"
    )
