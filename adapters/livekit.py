"""settled under LiveKit Agents (`pip install 'settled[livekit]'`).

LiveKit keeps a running tool alive through an interruption, but the tool lives in the job's
process: at hangup its result has nobody to go to, and a crash loses it. This adapter turns each
declared kind into a `function_tool` whose call records a durable action, waits briefly for the
business system, and reports the verified state; while the state is still moving it reports
"not confirmed yet" through `RunContext.update` (the model answers the caller at once) and returns
the outcome when it comes, as LiveKit's deferred tool reply.

    bridge = SettledLiveKit(client, conversation_id, load_action_kinds(names=["refund"]))
    agent = Agent(instructions=..., tools=bridge.tools())
    bridge.attach(session)          # before session.start(...)

What the caller heard: LiveKit's own playout tracking. LiveKit adds an assistant message to the
conversation once its speech's playout ended, with the text actually forwarded to the caller and
`interrupted` set when the speech handle was interrupted (a barge-in, or the session closing, which
interrupts every speech before it emits `close`); its `created_at` is when its generation
started. So a message presents a status only if it was generated after the model was handed that
status and carries its sentence or reference, and it counts as heard only when LiveKit did not
mark it interrupted. The end of the LLM's text is not it (the audio plays for seconds after), nor
is "the next assistant message after a tool result": a filler said with the tool call finishes
playing after the tool returned, and a holding line after a barge-in says nothing of the outcome.

`attach` forwards interrupted speech as `interrupted`, each assistant message that spoke a result
as `presented` (completed unless LiveKit marked it interrupted), and the session's close as
`channel_closed` with LiveKit's reason (participant disconnected: `hangup`; error: `dropped`).
"""

from typing import Any

try:
    from livekit.agents import AgentSession, CloseReason, RunContext, function_tool
    from livekit.agents.llm import ChatMessage, RawFunctionTool
    from livekit.agents.voice.events import CloseEvent, ConversationItemAddedEvent, SpeechCreatedEvent
    from livekit.agents.voice.speech_handle import SpeechHandle
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError("adapters.livekit needs LiveKit Agents: pip install 'settled[livekit]'") from error

from settled.adapters.channel import FollowingBridge
from settled.adapters.tools import AUTHORIZE_TOOL, CHECK_TOOL, ToolSpec

CLOSE_REASONS: dict[CloseReason, str] = {
    CloseReason.PARTICIPANT_DISCONNECTED: "hangup",
    CloseReason.ERROR: "dropped",
    CloseReason.JOB_SHUTDOWN: "job_shutdown",
    CloseReason.USER_INITIATED: "ended_by_agent",
    CloseReason.TASK_COMPLETED: "ended_by_agent",
}


class SettledLiveKit(FollowingBridge):
    """One LiveKit `AgentSession` (one conversation) bound to settled."""

    # -- tools -----------------------------------------------------------------------------------

    def tools(self) -> list[RawFunctionTool]:
        """The tool set as LiveKit function tools, each with its JSON Schema as the raw schema."""
        return [self._function_tool(spec) for spec in self.tool_specs()]

    def _function_tool(self, spec: ToolSpec) -> RawFunctionTool:
        settled = self.settled

        async def call(raw_arguments: dict[str, object], context: RunContext) -> str:
            operation_id = raw_arguments.get("operation_id")
            if spec.name == CHECK_TOOL:
                return await settled.answer_check(str(operation_id) if operation_id else None)
            if spec.name == AUTHORIZE_TOOL:
                acting = settled.authorize(str(operation_id or ""))
            else:
                acting = settled.request(spec.name, dict(raw_arguments))
            return await self.answer_following(acting, context.update)

        schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
        return function_tool(call, raw_schema=schema)

    # -- events ----------------------------------------------------------------------------------

    def attach(self, session: AgentSession[Any]) -> None:
        """Forward the session's events to settled; call before `session.start`."""
        session.on("speech_created", self._on_speech)
        session.on("conversation_item_added", self._on_item)
        session.on("close", self._on_close)
        self.settled.opened()

    def _on_speech(self, event: SpeechCreatedEvent) -> None:
        def done(handle: SpeechHandle) -> None:
            if handle.interrupted:
                self.settled.interrupted()

        event.speech_handle.add_done_callback(done)

    def _on_item(self, event: ConversationItemAddedEvent) -> None:
        item = event.item
        if isinstance(item, ChatMessage) and item.role == "assistant" and item.text_content:
            # Added once its playout ended, marked interrupted if it was cut off.
            heard = not item.interrupted
            self.settled.utterance(item.id, item.text_content, heard=heard, generated_at=item.created_at)

    def _on_close(self, event: CloseEvent) -> None:
        self.settled.closed(CLOSE_REASONS.get(event.reason, str(event.reason.value)))
