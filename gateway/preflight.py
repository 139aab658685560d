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


def namespace_fixes(namespace: str, mtls: bool) -> dict[str, str]:
    """The commands that create settled's namespace with its search attributes: on Temporal Cloud for
    the credentials settled is given (a client certificate: mTLS, whose namespace needs the CA that
    signed it; else an API key, which tcld's default, mTLS, would refuse without a CA)."""
    declared = visibility.declared()
    temporal = " ".join(f"--name {name} --type {kind}" for name, kind in declared.items())
    tcld = " ".join(f'--search-attribute "{name}={kind}"' for name, kind in declared.items())
    auth = "--auth-method mtls --ca-certificate-file CA.pem" if mtls else "--auth-method api_key"
    return {
        "self-hosted": f"temporal operator namespace create --namespace {namespace} "
        f"--retention {RETENTION_DAYS}d && temporal operator search-attribute create "
        f"--namespace {namespace} {temporal}",
        "Temporal Cloud": f"tcld namespace create --namespace {_cloud_name(namespace)} --region REGION "
        f"--retention-days {RETENTION_DAYS} {auth} {tcld}",
    }


def attribute_fixes(namespace: str, missing: dict[str, str], mistyped: dict[str, str]) -> dict[str, str]:
    """The commands that register the `missing` attributes ({name: type}) and re-create the
    `mistyped` ones with settled's type: Temporal cannot change a search attribute's type in place.
    Self-hosted, the attribute is removed and created again; on Temporal Cloud the mistyped one is
    renamed out of the way (its old values keep the new name) and settled's added."""
    wanted = {**mistyped, **missing}
    temporal = [
        *(
            f"temporal operator search-attribute remove --namespace {namespace} --name {name} --yes"
            for name in mistyped
        ),
        f"temporal operator search-attribute create --namespace {namespace} "
        + " ".join(f"--name {name} --type {kind}" for name, kind in wanted.items()),
    ]
    tcld = [
        *(
            f"tcld namespace search-attributes rename --namespace {namespace} --existing-name {name} "
            f"--new-name {name}Old"
            for name in mistyped
        ),
        f"tcld namespace search-attributes add --namespace {namespace} "
        + " ".join(f'--search-attribute "{name}={kind}"' for name, kind in wanted.items()),
    ]
    return {"self-hosted": " && ".join(temporal), "Temporal Cloud": " && ".join(tcld)}


async def _namespace(client: Client, settings: Settings) -> tuple[Check, Any]:
    namespace = settings.namespace
    try:
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            mtls = bool(settings.temporal.described()["client_certificate"])
            fix = namespace_fixes(namespace, mtls)
            return Check("namespace", "failed", f"namespace {namespace!r} does not exist", fix), None
        return Check("namespace", "failed", f"cannot describe namespace {namespace!r}: {error.message}"), None
    return Check("namespace", "ok", f"namespace {namespace!r} exists"), described


async def search_attribute_checks(client: Client, namespace: str) -> list[Check]:
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
    checks: list[Check] = []
    missing: dict[str, str] = {}
    mistyped: dict[str, str] = {}
    for name, wanted in visibility.declared().items():
        label = f"search attribute {name} ({wanted})"
        found = registered.get(name)
        if found == wanted:
            checks.append(Check(label, "ok", "registered"))
        elif found is None:
            missing[name] = wanted
            checks.append(Check(label, "failed", f"{name} is not registered on namespace {namespace!r}"))
        else:
            mistyped[name] = wanted
            checks.append(
                Check(
                    label,
                    "failed",
                    f"{name} is registered as {found}, settled needs {wanted}; Temporal cannot change a "
                    "search attribute's type in place: remove it and create it again (self-hosted, SQL "
                    "visibility) or rename it out of the way (Temporal Cloud), as the fix does; where "
                    "other workflows use the name, give settled a namespace of its own (SETTLED_NAMESPACE); "
                    "Elasticsearch visibility keeps a field's first type for every namespace: there the "
                    "name must be free in the cluster",
                )
            )
    if missing or mistyped:
        fix = attribute_fixes(namespace, missing, mistyped)
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
    namespace, described = await _namespace(client, settings)
    if described is None:
        return [namespace]
    return [
        namespace,
        *await search_attribute_checks(client, settings.namespace),
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


def fixes(checks: list[Check]) -> list[dict[str, Any]]:
    """Each distinct fix of the checks that did not pass, once, with the checks it fixes: one command
    often fixes several (every missing search attribute at once)."""
    found: dict[tuple[str, str], list[str]] = {}
    for check in checks:
        if check.verdict != "ok":
            for where, command in check.fix.items():
                found.setdefault((where, command), []).append(check.name)
    return [
        {"where": where, "command": command, "checks": names} for (where, command), names in found.items()
    ]


def refusal(checks: list[Check]) -> str | None:
    """One line naming every failed check and its fixes; None when nothing failed."""
    failed = [check for check in checks if check.verdict == "failed"]
    if not failed:
        return None
    details = "; ".join(check.detail for check in failed)
    said = "".join(f"; fix ({fix['where']}): {fix['command']}" for fix in fixes(failed))
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
