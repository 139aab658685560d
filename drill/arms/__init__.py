"""The two arms: the same scripted caller talks to a transcript-driven agent and to a settled-driven one.

Both are deterministic scripts (no language model). The caller hears and speaks through this protocol.
"""

from typing import Protocol

from settled.drill.timeline import Utterance


class Arm(Protocol):
    name: str

    async def open_voice(self) -> None:
        """The call starts."""

    def hear(self, turn: list[Utterance]) -> None:
        """A customer turn reached the agent (it may never get to respond: the call can drop first)."""

    async def respond(self) -> None:
        """React to the last turn; long work goes on in the background, so this returns at once."""

    async def drop_call(self) -> None:
        """The call drops, cutting whatever is being said."""

    async def open_text(self) -> None:
        """The customer continues in the text channel."""

    async def answer(self, message: Utterance) -> None:
        """Reply to a text message; returns once the agent has replied."""

    async def settle(self) -> None:
        """Until the agent's own work for the task has come to rest (bounded)."""

    async def close(self) -> None:
        """Stop everything still running."""
