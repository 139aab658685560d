"""Channel adapters: settled under the OpenAI Agents SDK (realtime), Pipecat, LiveKit Agents,
Google's ADK (Gemini Live) and an app that serves Twilio ConversationRelay's WebSocket.

Each adapter lives in its own module and imports its framework only there, so `import adapters`
(and `adapters.common`) works without any of them installed:

    pip install 'settled[openai-agents]'   # adapters.openai_agents
    pip install 'settled[pipecat]'         # adapters.pipecat
    pip install 'settled[livekit]'         # adapters.livekit
    pip install settled                    # adapters.conversation_relay (JSON messages: no extra)
    pip install 'settled[google-adk]'      # adapters.google_adk
"""

from settled.adapters.common import (
    ActionKind,
    SettledChannel,
    action_kinds,
    derived_operation_id,
    load_action_kinds,
    tool_answer,
)

__all__ = [
    "ActionKind",
    "SettledChannel",
    "action_kinds",
    "derived_operation_id",
    "load_action_kinds",
    "tool_answer",
]
