"""A refund over a LiveKit Agents session, with settled keeping the truth.

    make dev                              # settled, Temporal and the sandbox services
    python -m examples.livekit_refund     # a scripted call against them

`ScriptedLLM` stands in for the LLM and the session runs text-only (`session.run`), so this runs
offline without a LiveKit server. In a real agent keep `bridge.tools()` and `bridge.attach(session)`
and start the session in your room as usual.
"""

import itertools
from typing import Any

from livekit.agents import Agent, AgentSession, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr

from adapters.common import load_action_kinds
from adapters.livekit import SettledLiveKit
from examples.scripted import RefundScript, run_example
from settled.client import SettledClient

INSTRUCTIONS = (
    "You help callers with refunds. Confirm the order and amount before calling the refund tool. "
    "Say only what the tools tell you; never say a refund is done unless a tool says CONFIRMED."
)
CALLER = ["Please refund order {order_id}, 25.50 euros.", "Did you do it?"]


class ScriptedLLM(llm.LLM):
    """An LLM that follows a `RefundScript`: it calls a tool when the caller asks for something,
    and says each tool output it gets (including LiveKit's progress updates and deferred replies)."""

    def __init__(self, script: RefundScript, *, call_prefix: str = "call") -> None:
        super().__init__()
        self.script = script
        self.call_ids: list[str] = []
        self._prefix = call_prefix
        self._ids = itertools.count(1)
        self._seen: set[str] = set()

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        return _ScriptedStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    def next_chunk(self, chat_ctx: llm.ChatContext) -> llm.ChatChunk | None:
        fresh = [item for item in chat_ctx.items if item.id not in self._seen]
        self._seen.update(item.id for item in chat_ctx.items)
        outputs = [item.output for item in fresh if item.type == "function_call_output"]
        users = [item for item in fresh if item.type == "message" and item.role == "user"]
        if users:
            text = users[-1].text_content or ""
            call = self.script.decide(text)
            if call is not None:
                call_id = f"{self._prefix}_{next(self._ids)}"
                self.call_ids.append(call_id)
                tool_call = llm.FunctionToolCall(name=call.name, arguments=call.json, call_id=call_id)
                return llm.ChatChunk(
                    id=call_id, delta=llm.ChoiceDelta(role="assistant", tool_calls=[tool_call])
                )
            line = self.script.reply(outputs[-1]) if outputs else self.script.small_talk(text)
        elif outputs:
            line = self.script.reply(outputs[-1])
        else:
            return None
        return llm.ChatChunk(
            id=f"say_{next(self._ids)}", delta=llm.ChoiceDelta(role="assistant", content=line)
        )


class _ScriptedStream(llm.LLMStream):
    async def _run(self) -> None:
        assert isinstance(self._llm, ScriptedLLM)
        chunk = self._llm.next_chunk(self._chat_ctx)
        if chunk is not None:
            self._event_ch.send_nowait(chunk)


async def call(api_url: str, conversation_id: str, order_id: str) -> dict[str, Any]:
    """One scripted call: ask for a refund, ask whether it is done, hang up; then the handoff."""
    script = RefundScript(refund={"order_id": order_id, "amount": 25.5, "currency": "EUR"})
    async with SettledClient(api_url) as client:
        bridge = SettledLiveKit(
            client, conversation_id, load_action_kinds(names=["refund"]), authorize_on_call=True
        )
        session: AgentSession[None] = AgentSession(llm=ScriptedLLM(script))
        bridge.attach(session)
        await session.start(Agent(instructions=INSTRUCTIONS, tools=bridge.tools()))
        for line in CALLER:
            await session.run(user_input=line.format(order_id=order_id))
        await session.aclose()
        await bridge.aclose()
        handoff = await client.handoff(conversation_id)
    return {"said": script.said, "handoff": handoff}


def main() -> None:
    run_example(__doc__, call)


if __name__ == "__main__":
    main()
