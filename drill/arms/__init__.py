"""The two arms: the same scripted caller talks to a transcript-driven agent and to a settled-driven one.

Both are deterministic scripts (no language model). The caller hears and speaks through `Arm`; an
arm's background work is owned by a `Background`, so that closing the arm stops all of it.
"""

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

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


# -- background work -------------------------------------------------------------------------------

T = TypeVar("T")


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.errors: list[BaseException] = []

    def spawn(self, work: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.errors.append(task.exception())  # type: ignore[arg-type]

    def raise_first(self) -> None:
        """A failure in background work fails the run, instead of vanishing."""
        if self.errors:
            raise self.errors[0]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
