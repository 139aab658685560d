"""The go-ahead for a kind that needs one, asked of the person through MCP elicitation where the client
declared that capability, in the form of the revision it speaks: a server-to-client
`elicitation/create` request up to 2025-11-25, an `input_required` result that the client answers by
calling the tool again on 2026-07-28 (which allows the server no requests of its own). The question
holds the exact params; only a yes authorizes, recorded as by "mcp elicitation"."""

import enum
import json
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from settled.adapters.common import ActionKind

from settled.domain.models import ActionStatus

BY = "mcp elicitation"
# The key of the one input request, and the field of the form that carries the answer.
GO_AHEAD = "go_ahead"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        GO_AHEAD: {
            "type": "boolean",
            "title": "Go ahead",
            "description": "Yes: send exactly this request, once. No: nothing is sent.",
        }
    },
    "required": [GO_AHEAD],
}
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())


class Answer(enum.Enum):
    YES = "yes"
    NO = "no"
    DISMISSED = "dismissed"


# What the model is told before the tool text, when the person did not say yes.
NOT_GIVEN = {
    Answer.NO: "The caller said no when asked for the go-ahead: nothing was sent.",
    Answer.DISMISSED: "The caller closed the go-ahead question without answering: nothing was sent.",
}


def question(kind: ActionKind, status: ActionStatus) -> str:
    details = "\n".join(
        f"  {name}: {json.dumps(value, ensure_ascii=False)}" for name, value in status.params.items()
    )
    return (
        f"Go ahead with the request to {kind.description}, exactly as follows?\n{details}\n"
        f"Nothing is sent until you say yes (operation {status.operation_id})."
    )


def can_ask(ctx: ServerRequestContext[Any, Any]) -> bool:
    if not ctx.session.check_client_capability(_ELICITATION):
        return False
    # Up to 2025-11-25 the question travels as a request on the call's own stream, which needs one.
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.session.can_send_request


async def ask(
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    kind: ActionKind,
    status: ActionStatus,
) -> Answer | types.InputRequiredResult:
    """The person's answer, or (2026-07-28, first round) the question to hand back. Call only when
    `can_ask`."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        response = (params.input_responses or {}).get(GO_AHEAD)
        if response is None:
            form = types.ElicitRequestFormParams(message=question(kind, status), requested_schema=SCHEMA)
            return types.InputRequiredResult(input_requests={GO_AHEAD: types.ElicitRequest(params=form)})
    else:
        response = await ctx.session.elicit_form(
            question(kind, status), SCHEMA, related_request_id=ctx.request_id
        )
    return answer_of(response)


def answer_of(response: Any) -> Answer:
    if not isinstance(response, types.ElicitResult) or response.action == "cancel":
        return Answer.DISMISSED
    if response.action == "accept" and (response.content or {}).get(GO_AHEAD) is True:
        return Answer.YES
    return Answer.NO
