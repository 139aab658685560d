"""The checks a part makes before serving, and `settled doctor` makes on demand: Temporal is reached
and takes the credentials, the namespace exists, each of settled's search attributes is registered
with its type, and the server's features settled relies on are on.

Each check ends in a verdict: `ok`, `failed` (the part must not serve: the fix is given for a
self-hosted cluster, `temporal operator ...`, and for Temporal Cloud, `tcld ...`), or `degraded`
(settled works without it, a little slower, and says so once at start).
"""

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from settled.gateway.gateway import GatewayError, connect
from settled.gateway.reach import NOTHING_ANSWERS
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from settled.runtime.config import Settings
from settled.temporal import visibility

Verdict = Literal["ok", "failed", "degraded"]
# How long a namespace created by the fix keeps closed workflows readable (`settled replay`, audits).
RETENTION_DAYS = 30


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    detail: str
    # How to fix it: {"self-hosted": a `temporal operator` command, "Temporal Cloud": a `tcld` command}.
    fix: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _cloud_name(namespace: str) -> str:
    """A Temporal Cloud namespace is NAME.ACCOUNT; tcld creates it by NAME."""
    return namespace.split(".", 1)[0]


def _type_name(value: int) -> str:
    """`Keyword`, `Bool`: as Temporal's tools spell a search attribute's type."""
    return IndexedValueType.Name(value).removeprefix("INDEXED_VALUE_TYPE_").title().replace("_", "")


async def _namespace(client: Client, namespace: str) -> tuple[Check, Any]:
    try:
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            fix = {
                "self-hosted": f"temporal operator namespace create --namespace {namespace} "
                f"--retention {RETENTION_DAYS}d",
                "Temporal Cloud": f"tcld namespace create --namespace {_cloud_name(namespace)} "
                f"--region REGION --retention-days {RETENTION_DAYS}",
            }
            return Check("namespace", "failed", f"namespace {namespace!r} does not exist", fix), None
        return Check("namespace", "failed", f"cannot describe namespace {namespace!r}: {error.message}"), None
    return Check("namespace", "ok", f"namespace {namespace!r} exists"), described


async def _search_attributes(client: Client, namespace: str) -> list[Check]:
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError as error:
        return [
            Check(
                "search attributes",
                "failed",
                f"cannot list the namespace's search attributes ({error.status.name}: {error.message}); "
                "give these credentials the right to read them",
            )
        ]
    registered = {name: _type_name(kind) for name, kind in listed.custom_attributes.items()}
    registered.update({name: _type_name(kind) for name, kind in listed.system_attributes.items()})
    checks, missing = [], {}
    for name, wanted in visibility.declared().items():
        label = f"search attribute {name} ({wanted})"
        found = registered.get(name)
        if found == wanted:
            checks.append(Check(label, "ok", "registered"))
        elif found is None:
            missing[name] = wanted
            checks.append(Check(label, "failed", f"{name} is not registered on namespace {namespace!r}"))
        else:
            checks.append(
                Check(
                    label,
                    "failed",
                    f"{name} is registered as {found}, settled needs {wanted}; a search attribute's type "
                    "cannot change: use a namespace where the name is free",
                )
            )
    if missing:
        temporal = " ".join(f"--name {name} --type {kind}" for name, kind in missing.items())
        tcld = " ".join(f'--search-attribute "{name}={kind}"' for name, kind in missing.items())
        fix = {
            "self-hosted": f"temporal operator search-attribute create --namespace {namespace} {temporal}",
            "Temporal Cloud": f"tcld namespace search-attributes add --namespace {namespace} {tcld}",
        }
        checks = [
            Check(check.name, check.verdict, check.detail, fix if check.verdict == "failed" else {})
            for check in checks
        ]
    return checks


def _features(described: Any) -> list[Check]:
    info = described.namespace_info
    capabilities = info.capabilities if info.HasField("capabilities") else None
    checks = []
    if capabilities is not None and not capabilities.eager_workflow_start:
        checks.append(
            Check(
                "eager workflow start",
                "degraded",
                "off on this namespace: a new action's first task goes through the task queue instead of "
                "the API's own worker (a few milliseconds slower); nothing else changes",
                {"self-hosted": "dynamic config system.enableEagerWorkflowStart: true"},
            )
        )
    else:
        checks.append(Check("eager workflow start", "ok", "on"))
    if capabilities is not None and not capabilities.sync_update:
        checks.append(
            Check(
                "workflow updates",
                "failed",
                "off on this namespace: every control of an action (authorize, cancel, ...) is an update",
                {"self-hosted": "dynamic config frontend.enableUpdateWorkflowExecution: true"},
            )
        )
    else:
        checks.append(Check("workflow updates", "ok", "on"))
    return checks


async def checks_on(client: Client, settings: Settings) -> list[Check]:
    """Every check after the connection, on a connected client."""
    namespace, described = await _namespace(client, settings.namespace)
    if described is None:
        return [namespace]
    return [
        namespace,
        *await _search_attributes(client, settings.namespace),
        *_features(described),
    ]


def _connected(settings: Settings) -> Check:
    offered = settings.temporal.described()
    how = "TLS" if offered["tls"] else "plaintext"
    if offered["api_key"]:
        how += f", API key from {offered['api_key']}"
    if offered["client_certificate"]:
        how += ", client certificate"
    return Check("connection", "ok", f"reached {settings.temporal_address} ({how}); credentials accepted")


async def preflight(settings: Settings, client: Client | None = None) -> tuple[Client | None, list[Check]]:
    """Connect (unless given a client) and check; the client is None when it could not connect."""
    if client is None:
        try:
            client = await connect(settings)
        except GatewayError as error:
            return None, [Check("connection", "failed", error.message)]
    return client, [_connected(settings), *await checks_on(client, settings)]


def refusal(checks: list[Check]) -> str | None:
    """One line naming every failed check and its fixes; None when nothing failed."""
    failed = [check for check in checks if check.verdict == "failed"]
    if not failed:
        return None
    details = "; ".join(check.detail for check in failed)
    fixes: dict[str, str] = {}
    for check in failed:
        for where, command in check.fix.items():
            fixes.setdefault(command, where)
    said = "".join(f"; fix ({where}): {command}" for command, where in fixes.items())
    return f"{details}{said}"


def notes(checks: list[Check]) -> list[str]:
    return [f"{check.name}: {check.detail}" for check in checks if check.verdict == "degraded"]


class Refused(Exception):
    """A part must not serve: the message is the one line to print (cause and fix, no secret)."""


async def ready(
    settings: Settings, runtime: Runtime | None = None, unreachable_ok: bool = False
) -> tuple[Client | None, list[str]]:
    """The client a part serves on, checked; and the notes of what runs degraded. Raises `Refused`
    on any failed check. `unreachable_ok`: nothing answering yet is no refusal (None, a note)."""
    try:
        client = await connect(settings, runtime)
    except GatewayError as error:
        if unreachable_ok and error.message.startswith(NOTHING_ANSWERS):
            return None, [f"{error.message}; not checked yet (GET /healthz says when it is reached)"]
        raise Refused(error.message) from None
    _, checks = await preflight(settings, client)
    line = refusal(checks)
    if line is not None:
        raise Refused(line)
    return client, notes(checks)
