"""What every channel adapter shares, in one import: the kinds as tools and the operation ids
(`settled.adapters.tools`), what the model is told (`settled.adapters.answers`), and the channel:
the tool calls, the events forwarded in order without blocking the voice loop, and the rule for what
the caller heard (`settled.adapters.channel`).

Nothing here imports a framework. The adapters (`adapters.openai_agents`, `adapters.pipecat`,
`adapters.livekit`) translate their framework's tools and events into `SettledChannel` calls: each
only says when an utterance began, what it says, and whether its playback reached the end.
"""

from settled.adapters.answers import check_answer, check_line, error_answer, tool_answer
from settled.adapters.channel import MAX_REQUEST_ROUNDS, FollowingBridge, SettledChannel, carries
from settled.adapters.tools import (
    AUTHORIZE_DESCRIPTION,
    AUTHORIZE_TOOL,
    CHECK_DESCRIPTION,
    CHECK_TOOL,
    OPERATION_ID_SCHEMA,
    ActionKind,
    OperationIds,
    ToolSpec,
    action_kinds,
    canonical_params,
    derived_operation_id,
    earlier_operation_id,
    load_action_kinds,
    tool_set,
)

__all__ = [
    "AUTHORIZE_DESCRIPTION",
    "AUTHORIZE_TOOL",
    "CHECK_DESCRIPTION",
    "CHECK_TOOL",
    "MAX_REQUEST_ROUNDS",
    "OPERATION_ID_SCHEMA",
    "ActionKind",
    "FollowingBridge",
    "OperationIds",
    "SettledChannel",
    "ToolSpec",
    "action_kinds",
    "canonical_params",
    "carries",
    "check_answer",
    "check_line",
    "derived_operation_id",
    "earlier_operation_id",
    "error_answer",
    "load_action_kinds",
    "tool_answer",
    "tool_set",
]
