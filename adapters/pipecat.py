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

The observer forwards `InterruptionFrame` as `interrupted`, each bot turn that spoke a result
(`BotStartedSpeakingFrame` ... `TTSTextFrame` ... `BotStoppedSpeakingFrame`) as `presented`
(not completed when an interruption cut it), and the end of the pipeline as `channel_closed`
(`EndFrame`: `hangup`; `CancelFrame`: `dropped`; call `bridge.closed(reason)` from your
transport's disconnect handler for a more exact reason).
"""

import itertools
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
        TTSTextFrame,
    )
    from pipecat.observers.base_observer import BaseObserver, FramePushed
    from pipecat.services.llm_service import FunctionCallParams, LLMService
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError("adapters.pipecat needs Pipecat: pip install 'settled[pipecat]'") from error

from adapters.common import (
    AUTHORIZE_DESCRIPTION,
    AUTHORIZE_TOOL,
    CHECK_DESCRIPTION,
    CHECK_TOOL,
    OPERATION_ID_SCHEMA,
    FollowingBridge,
    error_answer,
    tool_answer,
)
from settled.client import SettledError, is_final
from settled.models import ActionStatus
from settled.states import State


class SettledPipecat(FollowingBridge):
    """One Pipecat pipeline (one conversation) bound to settled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turns = itertools.count(1)
        self._speaking: str | None = None
        self._cut_off = False
        self._calls_running = 0

    # -- tools -----------------------------------------------------------------------------------

    def tools_schema(self) -> ToolsSchema:
        tools = [
            FunctionSchema(
                name=kind.name,
                description=kind.tool_description(),
                properties=kind.params_schema.get("properties", {}),
                required=list(kind.params_schema.get("required", [])),
            )
            for kind in self.settled.kinds
        ]
        tools.append(FunctionSchema(CHECK_TOOL, CHECK_DESCRIPTION, {"operation_id": OPERATION_ID_SCHEMA}, []))
        if self.settled.needs_authorize_tool:
            tools.append(
                FunctionSchema(
                    AUTHORIZE_TOOL, AUTHORIZE_DESCRIPTION, {"operation_id": OPERATION_ID_SCHEMA}, []
                )
            )
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
            try:
                status = await self.settled.request(params.function_name, dict(params.arguments))
            except SettledError as error:
                await params.result_callback(error_answer(error))
                return
            await self._report(params, status.operation_id, status)
        finally:
            self._calls_running -= 1

    async def _handle_authorize(self, params: FunctionCallParams) -> None:
        operation_id = str(params.arguments.get("operation_id", ""))
        try:
            status = await self.settled.authorize(operation_id)
        except SettledError as error:
            await params.result_callback(error_answer(error))
            return
        await self._report(params, operation_id, status)

    async def _handle_check(self, params: FunctionCallParams) -> None:
        await params.result_callback(await self.settled.answer_check(params.arguments.get("operation_id")))

    async def _report(self, params: FunctionCallParams, operation_id: str, status: ActionStatus) -> None:
        """The verified state now; if it is still moving, the outcome too, once it comes."""
        authorize_tool = AUTHORIZE_TOOL if self.settled.needs_authorize_tool else None
        self.settled.told(status)
        waiting_for_user = status.state is State.REQUESTED and not status.authorized
        if is_final(status) or waiting_for_user or self.follow_s <= 0:
            await params.result_callback(tool_answer(status, authorize_tool))
            return
        not_final = FunctionCallResultProperties(is_final=False)
        await params.result_callback(tool_answer(status, authorize_tool), properties=not_final)
        try:
            final = await self.client.await_settled(operation_id, self.follow_s)
        except SettledError as error:
            await params.result_callback(
                f"Could not follow the request ({error.code}); it goes on. Do not say it is done."
            )
            return
        self.settled.told(final)
        await params.result_callback(tool_answer(final, authorize_tool))

    # -- events ----------------------------------------------------------------------------------

    def observer(self) -> BaseObserver:
        return _SettledObserver(self)

    def _on_frame(self, frame: Any) -> None:
        if isinstance(frame, InterruptionFrame):
            # Every user turn interrupts in Pipecat; it matters to settled only while the bot was
            # speaking or a request of ours is running.
            if self._speaking is not None or self._calls_running:
                self.settled.interrupted()
            if self._speaking is not None:
                self._cut_off = True
        elif isinstance(frame, BotStartedSpeakingFrame):
            if self._speaking is None:
                self._speaking, self._cut_off = f"turn-{next(self._turns)}", False
                self.settled.turn_started(self._speaking)
        elif isinstance(frame, TTSTextFrame):
            if self._speaking is not None:
                self.settled.turn_text(self._speaking, f"{frame.text} " if frame.text else "")
        elif isinstance(frame, BotStoppedSpeakingFrame):
            if self._speaking is not None:
                self.settled.turn_ended(self._speaking, completed=not self._cut_off)
                self._speaking = None
        elif isinstance(frame, EndFrame):
            self.settled.closed("hangup")
        elif isinstance(frame, CancelFrame):
            self.settled.closed("dropped")

    def closed(self, reason: str = "hangup") -> None:
        self.settled.closed(reason)

    async def aclose(self) -> None:
        await self.settled.aclose()


class _SettledObserver(BaseObserver):
    def __init__(self, bridge: SettledPipecat) -> None:
        # Once per frame, not once per hop through the pipeline.
        super().__init__(observe_every_push=False)
        self._bridge = bridge

    async def on_push_frame(self, data: FramePushed) -> None:
        self._bridge._on_frame(data.frame)
