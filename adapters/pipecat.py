"""settled under Pipecat (`pip install 'settled[pipecat]'`).

Pipecat cancels a function call on interruption by default and tells the model it did not
complete, although its request may already have reached the business system. This adapter
registers each declared kind with `cancel_on_interruption=False` (deliberately: the durable
action must not be cancelled by an interruption, and settled decides what happened). The handler
records the action, waits briefly, and reports the verified state; while the business system has
not answered it reports "not confirmed yet" as an intermediate result and the outcome when it
comes, through Pipecat's async-tool messages.

    bridge = SettledPipecat(client, conversation_id, load_action_kinds(names=["refund"]))
    bridge.register(llm)
    context = LLMContext(messages, tools=bridge.tools_schema())
    worker = PipelineWorker(pipeline, observers=[bridge.observer()])

What the caller heard: the output transport's playout. An utterance is one LLM response
(`LLMFullResponseStartFrame` ... `LLMTextFrame`s ... `LLMFullResponseEndFrame`, as the LLM service
pushes them). The TTS queues the response's start and end frames behind its audio, and the output
transport passes each on only once the audio before it has been written out, in real time; so the
response played to its end when its end frame has left the output transport and the bot stopped
speaking (`BotStoppedSpeakingFrame`) after its start left it, with no `InterruptionFrame`,
`EndFrame` or `CancelFrame` in between. The LLM finishing its text is not it, nor is a
`BotStoppedSpeakingFrame` alone: after an `EndFrame` Pipecat still runs the queued audio through its
speaking logic though the caller is gone, and a holding line stops the bot before the next
response plays. An interruption cuts every response not heard yet; an `EndFrame` or `CancelFrame`
ends the call, recording each as cut before `channel_closed`. Without a `BaseOutputTransport` in
the pipeline nothing is recorded as heard to its end (only as cut: a repeat, never a loss).

The observer forwards `InterruptionFrame` as `interrupted` (while the bot speaks or a request of
ours runs), each response that spoke a result as `presented`, and the end of the pipeline as
`channel_closed` (`EndFrame`: `hangup`; `CancelFrame`: `dropped`; call `bridge.closed(reason)`
from your transport's disconnect handler for a more exact reason).
"""

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

try:
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
    from pipecat.frames.frames import (
        BotStartedSpeakingFrame,
        BotStoppedSpeakingFrame,
        CancelFrame,
        EndFrame,
        FunctionCallResultProperties,
        InterruptionFrame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
    )
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.processors.frame_processor import FrameDirection
    from pipecat.services.llm_service import FunctionCallParams, LLMService
    from pipecat.transports.base_output import BaseOutputTransport
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError("adapters.pipecat needs Pipecat: pip install 'settled[pipecat]'") from error

from settled.adapters.channel import FollowingBridge
from settled.adapters.tools import AUTHORIZE_TOOL, CHECK_TOOL

from settled.domain.models import ActionStatus


@dataclass
class _Playout:
    """One LLM response on its way to the caller's ear."""

    started: bool = False  # its start frame left the output transport: its audio is next
    stopped: bool = False  # the bot stopped speaking since
    played: bool = False  # its end frame left the output transport: all its audio was written


class SettledPipecat(FollowingBridge):
    """One Pipecat pipeline (one conversation) bound to settled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._generating: str | None = None
        self._playouts: dict[str, _Playout] = {}  # by the id of the response's start frame
        self._voicing: str | None = None
        self._speaking = False
        self._last_interruption: int | None = None
        self._calls_running = 0

    # -- tools -----------------------------------------------------------------------------------

    def tools_schema(self) -> ToolsSchema:
        tools = [
            FunctionSchema(
                name=spec.name,
                description=spec.description,
                properties=spec.parameters.get("properties", {}),
                required=list(spec.parameters.get("required", [])),
            )
            for spec in self.tool_specs()
        ]
        return ToolsSchema(standard_tools=tools)

    def register(self, llm: LLMService) -> None:
        for kind in self.settled.kinds:
            # False, deliberately: an interruption must not cancel (nor report as cancelled) a
            # request that may already be at the business system. The action is durable anyway.
            llm.register_function(kind.name, self._handle_request, cancel_on_interruption=False)
        # A read: when the caller cuts in, its answer is moot, so let Pipecat cancel it.
        llm.register_function(CHECK_TOOL, self._handle_check, cancel_on_interruption=True)
        if self.settled.needs_authorize_tool:
            llm.register_function(AUTHORIZE_TOOL, self._handle_authorize, cancel_on_interruption=False)

    async def _handle_request(self, params: FunctionCallParams) -> None:
        self._calls_running += 1
        try:
            await self._answer(params, self.settled.request(params.function_name, dict(params.arguments)))
        finally:
            self._calls_running -= 1

    async def _handle_authorize(self, params: FunctionCallParams) -> None:
        operation_id = str(params.arguments.get("operation_id", ""))
        await self._answer(params, self.settled.authorize(operation_id))

    async def _handle_check(self, params: FunctionCallParams) -> None:
        await params.result_callback(await self.settled.answer_check(params.arguments.get("operation_id")))

    async def _answer(self, params: FunctionCallParams, call: Awaitable[ActionStatus]) -> None:
        """The answer as Pipecat's async tool result: an interim one while the outcome is awaited."""

        async def not_final(text: str) -> None:
            await params.result_callback(text, properties=FunctionCallResultProperties(is_final=False))

        await params.result_callback(await self.answer_following(call, not_final))

    # -- events ----------------------------------------------------------------------------------

    def observer(self) -> BaseObserver:
        return _SettledObserver(self)

    def _on_push(self, data: FramePushed) -> None:
        frame = data.frame
        if isinstance(frame, InterruptionFrame):
            if frame.id != self._last_interruption:  # once, not once per hop
                self._last_interruption = frame.id
                self._interrupted()
        elif isinstance(frame, EndFrame):
            self.settled.closed("hangup")
        elif isinstance(frame, CancelFrame):
            self.settled.closed("dropped")
        elif isinstance(data.source, LLMService) and data.direction is FrameDirection.DOWNSTREAM:
            self._generated(frame)
        elif isinstance(data.source, BaseOutputTransport) and data.direction is FrameDirection.DOWNSTREAM:
            self._played(frame)

    def _generated(self, frame: Any) -> None:
        if isinstance(frame, LLMFullResponseStartFrame):
            self._generating = str(frame.id)
            self._playouts[self._generating] = _Playout()
            self.settled.utterance_started(self._generating)
        elif isinstance(frame, LLMTextFrame) and self._generating is not None:
            self.settled.utterance_text(self._generating, frame.text)
        elif isinstance(frame, LLMFullResponseEndFrame):
            self._generating = None

    def _played(self, frame: Any) -> None:
        if isinstance(frame, LLMFullResponseStartFrame) and str(frame.id) in self._playouts:
            self._voicing = str(frame.id)
            self._playouts[self._voicing].started = True
        elif isinstance(frame, LLMFullResponseEndFrame) and self._voicing is not None:
            self._playouts[self._voicing].played = True
            self._heard_if_done(self._voicing)
            self._voicing = None
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._speaking = False
            for response, playout in list(self._playouts.items()):
                playout.stopped = playout.stopped or playout.started
                self._heard_if_done(response)

    def _heard_if_done(self, response: str) -> None:
        playout = self._playouts[response]
        if playout.started and playout.stopped and playout.played:
            del self._playouts[response]
            self.settled.utterance_ended(response, heard=True)

    def _interrupted(self) -> None:
        # Every user turn interrupts in Pipecat; it matters to settled only while the bot was
        # speaking or a request of ours is running. Either way the output dropped what it had not
        # played: every response not heard yet is cut.
        if self._speaking or self._calls_running:
            self.settled.interrupted()
        self._playouts.clear()
        self._voicing = None
        self.settled.cut_off()


class _SettledObserver(BaseObserver):
    def __init__(self, bridge: SettledPipecat) -> None:
        # Every hop: the output transport's own pushes are the playout.
        super().__init__(observe_every_push=True)
        self._bridge = bridge

    async def on_push_frame(self, data: FramePushed) -> None:
        self._bridge._on_push(data)
