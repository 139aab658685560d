"""The live log of one run: the arms and the scripted caller write to it, and the caller waits on it
for the moments a cut needs ("the confirmation has started", "the write is held")."""

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from settled.drill.timeline import Mark, MarkName, Sample, Timeline, Utterance, now

T = TypeVar("T")


class DrillTimeout(Exception):
    """Something a run waits for did not happen by its deadline."""


class RunLog:
    def __init__(self) -> None:
        self.timeline = Timeline()
        self._changed = asyncio.Event()

    def touch(self) -> None:
        """Wake everyone waiting: something in the timeline changed."""
        self._changed.set()
        self._changed = asyncio.Event()

    def utter(self, **fields: Any) -> Utterance:
        utterance = Utterance(at=now(), **fields)
        self.timeline.utterances.append(utterance)
        self.touch()
        return utterance

    def mark(self, name: MarkName, params: dict[str, Any] | None = None) -> Mark:
        mark = Mark(at=now(), name=name, params=params)
        self.timeline.marks.append(mark)
        self.touch()
        return mark

    def sample(self, ms: float, name: Literal["write", "api"] = "write", label: str | None = None) -> None:
        self.timeline.samples.append(Sample(name=name, ms=round(ms, 2), label=label))

    async def until(self, probe: Callable[[Timeline], T | None], timeout_s: float, what: str) -> T:
        """The first truthy answer of `probe`, re-checked whenever the timeline changes."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = probe(self.timeline)
            if found:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrillTimeout(f"timed out after {timeout_s:g}s waiting for {what}")
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
