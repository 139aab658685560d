"""Operator commands: find, inspect and act on actions; export and replay histories.

A table by default, JSON with `--json`; the exit code is non-zero on any failure.
"""

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from settled.gateway.gateway import Gateway, GatewayError, connect
from settled.gateway.preflight import refusal, search_attribute_checks
from settled.gateway.runs import every_run
from temporalio.client import WorkflowExecution, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from settled.domain.kinds import load_kinds
from settled.domain.models import ActionStatus
from settled.domain.states import State
from settled.runtime.config import Settings
from settled.temporal import visibility
from settled.temporal.identity import action_workflow_id


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # Not rich's own exit 1: the entry point ends every command alike, as SIGPIPE ends a Unix tool.
        self.quiet = True
        raise BrokenPipeError


console = _Console()
OPERATOR_WAIT_S = 10.0


def list_query(tenant: str | None, conversation: str | None, state: str | None, kind: str | None) -> str:
    clauses = [
        "WorkflowType = 'Action'",
        f"{visibility.TENANT.name} = {visibility.quoted(tenant or visibility.NO_TENANT)}",
    ]
    for key, value in (
        (visibility.CONVERSATION, conversation),
        (visibility.STATE, state),
        (visibility.KIND, kind),
    ):
        if value:
            clauses.append(f"{key.name} = {visibility.quoted(value)}")
    return " AND ".join(clauses)


def _print_status(status: ActionStatus, as_json: bool) -> None:
    if as_json:
        print(status.model_dump_json(indent=2))
        return
    table = Table(title=f"{status.kind} {status.operation_id}", show_header=False)
    for name in ("conversation_id", "state", "claim", "authorized", "dispatched", "attempts", "business_ref",
                 "reason", "cancel_requested", "compensated", "needs_attention", "say"):  # fmt: skip
        table.add_row(name, str(getattr(status, name)))
    table.add_row("params", json.dumps(status.params))
    if status.presented:
        presented = status.presented
        table.add_row(
            "presented",
            f"{presented.channel} ({'finished' if presented.completed else 'cut'}): {presented.text}",
        )
    console.print(table)
    history = Table("at", "state", "note", title="transitions")
    for entry in status.history:
        history.add_row(entry.at.isoformat(timespec="milliseconds"), entry.state.value, entry.note)
    console.print(history)
    if status.log:
        log = Table("at", "event", "note", title="controls and business answers")
        for item in status.log:
            log.add_row(item.at.isoformat(timespec="milliseconds"), item.event, item.note)
        console.print(log)


def _row(execution: WorkflowExecution, tenant: str | None) -> dict[str, Any]:
    attributes = execution.typed_search_attributes
    return {
        "workflow_id": execution.id,
        "operation_id": execution.id.split(":", 1)[1].removeprefix(f"{tenant}:" if tenant else ""),
        "conversation_id": attributes.get(visibility.CONVERSATION),
        "kind": attributes.get(visibility.KIND),
        "state": attributes.get(visibility.STATE),
        "needs_attention": attributes.get(visibility.NEEDS_ATTENTION),
        "started_at": execution.start_time.isoformat(),
        "open": execution.close_time is None,
    }


async def _unsearchable(gateway: Gateway, error: RPCError) -> None:
    """A query of settled's own that the server refuses names an attribute the namespace lacks (or
    has with another type): say which, and the command that registers it, as `settled doctor` does."""
    line = refusal(await search_attribute_checks(gateway.client, gateway.client.namespace))
    if line is not None:
        raise GatewayError(
            "temporal_error",
            f"the server refused the search ({error.message}): {line} (settled doctor checks it all)",
        ) from None


async def _list(gateway: Gateway, args: argparse.Namespace) -> int:
    if args.state and args.state not in {state.value for state in State}:
        raise GatewayError(
            "invalid_request", f"--state {args.state!r}: one of {', '.join(s.value for s in State)}"
        )
    query = list_query(args.tenant, args.conversation, args.state, args.kind)
    latest: dict[str, dict[str, Any]] = {}
    try:
        async for execution in gateway.client.list_workflows(query):
            # An action a late control opened again has a run for each opening: its latest speaks.
            row = _row(execution, args.tenant)
            seen = latest.get(row["workflow_id"])
            if seen is None or row["started_at"] > seen["started_at"]:
                latest[row["workflow_id"]] = row
    except RPCError as error:
        if error.status is RPCStatusCode.INVALID_ARGUMENT:
            await _unsearchable(gateway, error)
        raise
    rows = list(latest.values())
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        table = Table("operation", "conversation", "kind", "state", "attention", "started", title=query)
        for row in rows:
            attention = "yes" if row["needs_attention"] else ""
            table.add_row(
                row["operation_id"],
                row["conversation_id"],
                row["kind"],
                row["state"],
                attention,
                row["started_at"],
            )
        console.print(table)
    return 0


async def _history(gateway: Gateway, tenant: str | None, operation_id: str) -> WorkflowHistory:
    """The history of the action's latest run."""
    return (await _runs(gateway, tenant, operation_id, latest_only=True))[-1]


async def _runs(
    gateway: Gateway, tenant: str | None, operation_id: str, latest_only: bool = False
) -> list[WorkflowHistory]:
    """The history of every run of the action, oldest first (`settled.gateway.runs`)."""
    workflow_id = action_workflow_id(tenant, operation_id)
    try:
        if latest_only:
            return [await gateway.client.get_workflow_handle(workflow_id).fetch_history()]
        return await every_run(gateway.client, workflow_id)
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            raise GatewayError("not_found", f"no action with operation id {operation_id!r}") from None
        raise


async def _export(gateway: Gateway, args: argparse.Namespace) -> int:
    history = await _history(gateway, args.tenant, args.operation_id)
    print(history.to_json())
    return 0


async def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    try:
        needs_server = not (args.command == "replay" and not args.operation_ids and not args.query)
        gateway = None
        if needs_server:
            gateway = Gateway(
                await connect(settings), load_kinds(settings.config_path, settings.sandbox_url), settings
            )
        if args.command == "replay":
            from settled.cli import replay

            return await replay.run(
                gateway, args, settings, lambda operation_id: _runs(gateway, args.tenant, operation_id)
            )
        assert gateway is not None
        if args.command == "list":
            return await _list(gateway, args)
        if args.command == "export-history":
            return await _export(gateway, args)
        tenant, operation_id = args.tenant, args.operation_id
        if args.command == "status":
            status = await gateway.get(tenant, operation_id)
        elif args.command == "authorize":
            status = await gateway.authorize(tenant, operation_id, "operator", OPERATOR_WAIT_S)
        elif args.command == "cancel":
            status = await gateway.cancel(tenant, operation_id, "operator", None, OPERATOR_WAIT_S)
        else:
            status = await gateway.reconcile(
                tenant, operation_id, OPERATOR_WAIT_S, "reconcile requested by an operator"
            )
        _print_status(status, args.json)
        return 0
    except RPCError as error:  # what no command above names in its own words
        code = _RPC_CODES.get(error.status, "temporal_error")
        return _failed(args, GatewayError(code, f"{error.status.name}: {error.message}"))
    except GatewayError as error:
        return _failed(args, error)


# What Temporal's refusals mean to an operator, in the API's error codes.
_RPC_CODES = {
    RPCStatusCode.NOT_FOUND: "not_found",
    RPCStatusCode.INVALID_ARGUMENT: "invalid_request",
    RPCStatusCode.UNAVAILABLE: "temporal_unavailable",
    RPCStatusCode.DEADLINE_EXCEEDED: "temporal_unavailable",
    RPCStatusCode.UNAUTHENTICATED: "temporal_refused",
    RPCStatusCode.PERMISSION_DENIED: "temporal_refused",
}


def _failed(args: argparse.Namespace, error: GatewayError) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": {"code": error.code, "message": error.message}}))
    print(f"settled: {error.code}: {error.message}", file=sys.stderr)
    return 1
