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

from settled.adapters.common import (
    AUTHORIZE_DESCRIPTION,
    AUTHORIZE_TOOL,
    CHECK_DESCRIPTION,
    CHECK_TOOL,
    OPERATION_ID_SCHEMA,
    ActionKind,
    FollowingBridge,
    error_answer,
    tool_answer,
)

from settled.client import SettledError, is_final
from settled.domain.models import ActionStatus
from settled.domain.states import State

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
        tools = [self._kind_tool(kind) for kind in self.settled.kinds]
        settled = self.settled

        async def verify_action(raw_arguments: dict[str, object], context: RunContext) -> str:
            operation_id = raw_arguments.get("operation_id")
            return await settled.answer_check(str(operation_id) if operation_id else None)

        tools.append(function_tool(verify_action, raw_schema=_schema(CHECK_TOOL, CHECK_DESCRIPTION, [])))
        if settled.needs_authorize_tool:

            async def authorize_action(raw_arguments: dict[str, object], context: RunContext) -> str:
                operation_id = str(raw_arguments.get("operation_id", ""))
                try:
                    status = await settled.authorize(operation_id)
                except SettledError as error:
                    return error_answer(error)
                return await self._report(context, status)

            schema = _schema(AUTHORIZE_TOOL, AUTHORIZE_DESCRIPTION, ["operation_id"])
            tools.append(function_tool(authorize_action, raw_schema=schema))
        return tools

    def _kind_tool(self, kind: ActionKind) -> RawFunctionTool:
        settled = self.settled

        async def request(raw_arguments: dict[str, object], context: RunContext) -> str:
            try:
                status = await settled.request(kind.name, dict(raw_arguments))
            except SettledError as error:
                return error_answer(error)
            return await self._report(context, status)

        schema = {"name": kind.name, "description": kind.tool_description(), "parameters": kind.params_schema}
        return function_tool(request, raw_schema=schema)

    async def _report(self, context: RunContext, status: ActionStatus) -> str:
        """The verified state now; if it is still moving, the outcome too, once it comes."""
        authorize_tool = AUTHORIZE_TOOL if self.settled.needs_authorize_tool else None
        self.settled.told(status)
        waiting_for_user = status.state is State.REQUESTED and not status.authorized
        if is_final(status) or waiting_for_user or self.follow_s <= 0:
            return tool_answer(status, authorize_tool)
        # The first update answers the model now, so the caller hears "not confirmed yet" instead
        # of silence; what this function returns later arrives as LiveKit's deferred reply.
        await context.update(tool_answer(status, authorize_tool))
        try:
            final = await self.client.await_settled(status.operation_id, self.follow_s)
        except SettledError as error:
            return f"Could not follow the request ({error.code}); it goes on. Do not say it is done."
        self.settled.told(final)
        return tool_answer(final, authorize_tool)

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

    def closed(self, reason: str = "hangup") -> None:
        self.settled.closed(reason)

    async def aclose(self) -> None:
        await self.settled.aclose()


def _schema(name: str, description: str, required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"operation_id": OPERATION_ID_SCHEMA}, "required": required}
    return {"name": name, "description": description, "parameters": parameters}
