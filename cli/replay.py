"""`settled replay`: run workflow histories against the current code, a gate a deploy can wait on.

It cannot hang. A file is checked to be a whole history before the SDK sees it: the SDK's core panics
on one that does not begin with the workflow's start or whose events are out of sequence, and then
never answers. And as a last resort a watchdog ends the command, in one line and exit 1, when the SDK
gives no verdict on a history for `--timeout` seconds.
"""

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from settled.gateway.gateway import Gateway, GatewayError
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from settled.runtime.config import Settings
from settled.temporal.codec import data_converter

EXPORT_HINT = "export one with settled export-history"


def whole_history_problem(history: WorkflowHistory) -> str | None:
    """Why the SDK could not replay this history, or None: it has events, numbered 1, 2, 3 … in order,
    and the first is the workflow's start, with the run id and type the SDK needs."""
    events = history.events
    if not events:
        return "has no events"
    first = events[0]
    if first.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        named = EventType.Name(first.event_type).removeprefix("EVENT_TYPE_")
        return f"its first event is {named}, not WORKFLOW_EXECUTION_STARTED: its start is missing"
    started = first.workflow_execution_started_event_attributes
    if not first.HasField("workflow_execution_started_event_attributes") or not started.workflow_type.name:
        return "its first event does not say which workflow started"
    if not started.original_execution_run_id:
        return "its first event carries no run id (originalExecutionRunId)"
    for position, event in enumerate(events, start=1):
        if event.event_id != position:
            return f"its events are out of sequence: event {position} has id {event.event_id}"
    return None


def read_history(path: Path) -> WorkflowHistory:
    """A whole history from an exported file, or a GatewayError naming the problem in one line."""

    def refused(problem: str) -> GatewayError:
        return GatewayError("invalid_request", f"--file {path}: {problem}")

    try:
        text = path.read_text()
    except OSError as error:
        raise refused(error.strerror or str(error)) from None
    except UnicodeDecodeError:
        raise refused(f"not a workflow history: not UTF-8 text ({EXPORT_HINT})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise refused(f"not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("events"), list):
        raise refused(f'not a workflow history: no "events" list ({EXPORT_HINT})')
    try:
        history = WorkflowHistory.from_json(path.stem, data)
    except Exception:  # the parser's errors range from JSON shapes to protobuf fields
        raise refused(f"not a workflow history ({EXPORT_HINT})") from None
    problem = whole_history_problem(history)
    if problem is not None:
        raise refused(f"not a whole workflow history: {problem} ({EXPORT_HINT})")
    return history


class Watchdog:
    """Ends the process, after `say`, when `progressed` is not called for `limit_s` seconds. A thread
    of its own: the event loop may be waiting on an SDK that will never answer."""

    def __init__(self, limit_s: float, say: Callable[[], None]) -> None:
        self._limit_s = limit_s
        self._say = say
        self._last = time.monotonic()
        self._finished = threading.Event()
        threading.Thread(target=self._watch, name="replay-watchdog", daemon=True).start()

    def progressed(self) -> None:
        self._last = time.monotonic()

    def finish(self) -> None:
        self._finished.set()

    def _watch(self) -> None:
        while not self._finished.wait(min(1.0, self._limit_s / 4)):
            if time.monotonic() - self._last > self._limit_s:
                self._say()
                sys.stdout.flush()
                sys.stderr.flush()
                # Out without finalizing: a stuck SDK thread would hold up an orderly exit too.
                os._exit(1)


async def replay(
    histories: list[WorkflowHistory], settings: Settings, timeout_s: float, as_json: bool
) -> list[dict[str, str]]:
    """Each history's failure, if any; a history the SDK gives no verdict on within `timeout_s` ends
    the process (exit 1) naming it."""
    from settled.workflows.hosting import WORKFLOWS, workflow_runner

    current = [0]

    def say_stuck() -> None:
        workflow_id = histories[current[0]].workflow_id
        message = (
            f"the Temporal SDK gave no verdict on {workflow_id} within {timeout_s:g} s: it cannot replay "
            "this history (is it a whole exported history?)"
        )
        if as_json:
            print(json.dumps({"error": {"code": "replay_stuck", "message": message}}))
        print(f"settled: replay_stuck: {message}", file=sys.stderr)

    replayer = Replayer(
        # The SDK's own log lines would land on stdout, amid --json: every verdict is reported here.
        runtime=Runtime(telemetry=TelemetryConfig(logging=None)),
        workflows=WORKFLOWS,
        data_converter=data_converter(settings.encryption_keys),
        workflow_runner=workflow_runner(sandboxed=True),
    )
    failures: list[dict[str, str]] = []
    watchdog = Watchdog(timeout_s, say_stuck)
    try:
        async with replayer.workflow_replay_iterator(_each(histories)) as results:
            async for result in results:
                if result.replay_failure is not None:
                    failures.append(
                        {"workflow_id": result.history.workflow_id, "error": str(result.replay_failure)}
                    )
                current[0] += 1
                watchdog.progressed()
    finally:
        watchdog.finish()
    return failures


async def _each(histories: list[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    for history in histories:
        yield history


async def _matching(gateway: Gateway, query: str) -> list[WorkflowHistory]:
    try:
        return [history async for history in gateway.client.list_workflows(query).map_histories()]
    except RPCError as error:
        if error.status is RPCStatusCode.INVALID_ARGUMENT:
            raise GatewayError("invalid_request", f"--query: {error.message}") from None
        raise


async def run(
    gateway: Gateway | None,
    args: argparse.Namespace,
    settings: Settings,
    runs_of: Callable[[str], Awaitable[list[WorkflowHistory]]],
) -> int:
    histories = [read_history(Path(path)) for path in args.file]
    matched_none = False
    if gateway is not None:
        for operation_id in args.operation_ids:
            histories.extend(await runs_of(operation_id))  # every run of the action
        if args.query:
            found = await _matching(gateway, args.query)
            matched_none = not found
            histories.extend(found)
    if not histories and not matched_none:
        raise GatewayError("invalid_request", "nothing to replay: give operation ids, --query or --file")
    failures = await replay(histories, settings, args.timeout, args.json) if histories else []
    summary = {"replayed": len(histories), "failed": len(failures), "failures": failures}
    if args.json:
        print(json.dumps(summary, indent=2))
        if matched_none:
            print("settled: --query matched no workflow", file=sys.stderr)
    else:
        if matched_none:
            print("--query matched no workflow: nothing of it to replay")
        print(f"replayed {len(histories)} histories, {len(failures)} non-deterministic")
        for failure in failures:
            print(f"{failure['workflow_id']}: {failure['error']}")
    return 1 if failures else 0
