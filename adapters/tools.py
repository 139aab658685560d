"""The kinds as tools, and the operation id of a tool call: what every adapter offers the model (one
tool per kind, `verify_action`, and `authorize_action` when a kind needs a go-ahead), from the API or
a kinds file, and the id that makes one request of one conversation one durable action."""

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from settled.client import SettledClient
from settled.domain.canonical import canonical_params, earlier_params_text
from settled.domain.models import KindInfo

if TYPE_CHECKING:
    from settled.domain.kinds import KindSpec

CHECK_TOOL = "verify_action"
AUTHORIZE_TOOL = "authorize_action"
CHECK_DESCRIPTION = (
    "Answer 'did you do it?' from verified state: checks the business system now. Pass the "
    "operation_id of one request, or leave it empty for every request in this conversation. "
    "Only say something is done when this says CONFIRMED."
)
AUTHORIZE_DESCRIPTION = (
    "Give the go-ahead for a recorded request that needs it. Call only after the caller clearly "
    "said yes to exactly that request; pass its operation_id."
)
OPERATION_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "the operation id of the request (op_...)",
}


@dataclass(frozen=True)
class ActionKind:
    """A kind declared in the kinds file, as a tool the model may call."""

    kind: str
    description: str
    params_schema: dict[str, Any]
    requires_authorization: bool = False
    tool_name: str | None = None

    @property
    def name(self) -> str:
        return self.tool_name or self.kind

    @classmethod
    def from_spec(cls, spec: "KindInfo | KindSpec", tool_name: str | None = None) -> "ActionKind":
        return cls(
            kind=spec.name,
            description=spec.description,
            params_schema=dict(spec.params_schema),
            requires_authorization=spec.requires_authorization,
            tool_name=tool_name,
        )

    def tool_description(self) -> str:
        what = self.description[:1].upper() + self.description[1:]
        go_ahead = " It needs the caller's go-ahead first." if self.requires_authorization else ""
        return (
            f"{what}. Records the request durably and sends it to the business system once.{go_ahead} "
            "The result says whether it is confirmed: never tell the caller it is done unless the "
            "result says CONFIRMED. Calling again with the same details returns the same request, "
            "never a second one."
        )


@dataclass(frozen=True)
class ToolSpec:
    """A tool of the adapters' tool set in no framework's terms: its name, what the model is told, and
    the JSON Schema of its arguments (for an edge that describes tools as JSON: a platform, MCP)."""

    name: str
    description: str
    parameters: dict[str, Any]


def _operation_id_parameters(required: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"operation_id": OPERATION_ID_SCHEMA},
        "required": ["operation_id"] if required else [],
    }


def tool_set(kinds: Iterable[ActionKind], authorize_tool: bool | None = None) -> list[ToolSpec]:
    """The adapters' tool set: one tool per kind, `verify_action`, and `authorize_action` when a kind
    needs a go-ahead (`authorize_tool` decides instead, when given)."""
    kinds = list(kinds)
    if authorize_tool is None:
        authorize_tool = any(kind.requires_authorization for kind in kinds)
    tools = [ToolSpec(kind.name, kind.tool_description(), kind.params_schema) for kind in kinds]
    tools.append(ToolSpec(CHECK_TOOL, CHECK_DESCRIPTION, _operation_id_parameters(required=False)))
    if authorize_tool:
        tools.append(ToolSpec(AUTHORIZE_TOOL, AUTHORIZE_DESCRIPTION, _operation_id_parameters(required=True)))
    return tools


async def action_kinds(client: SettledClient, names: Iterable[str] | None = None) -> list[ActionKind]:
    """The kinds the settled API offers (`GET /v1/kinds`), as tools: no copy of the kinds file needed.
    `names` picks some of them, in that order."""
    offered = {kind.name: kind for kind in await client.kinds()}
    return _chosen(offered, names, "the settled API")


def load_action_kinds(
    path: str | Path | None = None, names: Iterable[str] | None = None, sandbox_url: str | None = None
) -> list[ActionKind]:
    """The kinds of a kinds file (the same file the worker and API read), as tools. Reading the file
    needs the server extra (its validation); `action_kinds` asks the API instead.

    Without a path: the built-in sandbox kinds. `names` picks some of them, in that order.
    """
    from settled.domain.kinds import load_kinds  # the server extra: jsonschema validates the file

    kinds = load_kinds(path, sandbox_url) if sandbox_url else load_kinds(path)
    return _chosen({spec.name: spec for spec in kinds}, names, kinds.source)


def _chosen(
    offered: "dict[str, KindInfo] | dict[str, KindSpec]", names: Iterable[str] | None, source: str
) -> list[ActionKind]:
    wanted = list(names) if names is not None else sorted(offered)
    unknown = [name for name in wanted if name not in offered]
    if unknown:
        raise KeyError(f"no kind {unknown[0]!r} in {source}; known: {', '.join(sorted(offered))}")
    return [ActionKind.from_spec(offered[name]) for name in wanted]


def derived_operation_id(conversation_id: str, kind: str, params: dict[str, Any], round_: int = 1) -> str:
    """One request of one conversation, one id: a model that calls the tool again with the same
    details (after an interruption, a timeout, "try again"), however it writes them (`5` or `5.0`, keys
    in any order), meets the same durable action. The params' canonical form: `settled.domain.canonical`."""
    return _operation_id(conversation_id, kind, canonical_params(params), round_)


def earlier_operation_id(conversation_id: str, kind: str, params: dict[str, Any], round_: int = 1) -> str:
    """The id the same request was given before params were compared as values: an action created
    under it must still be met (`SettledChannel.request` looks for it where the two ids differ)."""
    return _operation_id(conversation_id, kind, earlier_params_text(params), round_)


def _operation_id(conversation_id: str, kind: str, canonical: str, round_: int) -> str:
    # "surrogatepass": params that are no Unicode text still get an id (the API refuses them by name);
    # for text it changes no byte.
    text = f"{conversation_id}\n{kind}\n{canonical}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    base = f"op_{digest[:32]}"
    return base if round_ == 1 else f"{base}-{round_}"


OperationIds = Callable[[str, str, dict[str, Any], int], str]
