"""A scripted caller and a scripted model, so the examples (and their tests) run offline.

The model is deliberately simple and deterministic: it calls a tool when the caller asks for
something, and then says what the tool returned (the part after "Tell the caller:", if any).
It believes its tools; whatever it claims comes from them. That is exactly what makes a tool that
pretends completion dangerous, and a tool that reports verified state safe.
"""

import argparse
import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

FILLER = "One moment, I'm taking care of that."
# A line a model may say while it waits on a tool, right before the result: it presents nothing.
HOLDING = "I'm still working on that."
VERIFY_TOOL = "verify_action"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    @property
    def json(self) -> str:
        return json.dumps(self.arguments)


@dataclass
class RefundScript:
    """What the scripted model does for each thing the caller says."""

    refund: dict[str, Any]
    tool: str = "refund"
    said: list[str] = field(default_factory=list)
    # The same request as the model writes it when asked to try again: a model re-serializes its
    # arguments, `5.0` for `5`, keys in another order (None: as the first time).
    again: dict[str, Any] | None = None

    def decide(self, user_text: str) -> ToolCall | None:
        text = user_text.lower()
        if "did you" in text or "is it done" in text:
            return ToolCall(VERIFY_TOOL, {})
        if "try again" in text and self.again is not None:
            return ToolCall(self.tool, dict(self.again))
        if "refund" in text or "try again" in text:
            return ToolCall(self.tool, dict(self.refund))
        return None

    def reply(self, tool_output: str) -> str:
        """What the model says after a tool returned: it relays the tool, word for word (a bare
        CANCELLED, Pipecat's note for a call cut off by an interruption, as "it didn't go through")."""
        _, marker, tail = tool_output.partition("Tell the caller:")
        # The sentence to tell is one line; a framework may append its own notes to the model below.
        line = tail.strip().split("\n")[0] if marker else tool_output.strip()
        if line.startswith("CANCELLED"):
            line = "Sorry, the refund didn't go through."
        self.said.append(line)
        return line

    def small_talk(self, user_text: str) -> str:
        line = "Is there anything else I can help with?"
        self.said.append(line)
        return line


def run_example(description: str | None, call: Callable[[str, str, str], Awaitable[dict[str, Any]]]) -> None:
    """The command line every example shares: run one scripted call, print what was said and the handoff."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--api", default="http://127.0.0.1:8000", help="the settled API")
    parser.add_argument("--order", default=f"o-{uuid.uuid4().hex[:6]}")
    args = parser.parse_args()
    result = asyncio.run(call(args.api, f"conv-{uuid.uuid4().hex[:8]}", args.order))
    for line in result["said"]:
        print(f"agent: {line}")
    handoff = result["handoff"]
    print(f"handoff: work={handoff.work} voice={handoff.channels.voice} ({handoff.channel_reasons})")
    for action in handoff.actions:
        print(f"  {action.operation_id}: {action.state} ({action.business_ref}) - {action.say}")
