"""Simulated speech: sentences take time to say, one at a time, and a cut stops one mid-sentence.

Time is compressed (a few milliseconds per character, several times faster than real speech) so a
full matrix runs in minutes; the order of events, which is what the drill is about, is unchanged.
"""

import asyncio
import time
from collections import deque
from typing import Any

from settled.drill.runlog import RunLog
from settled.drill.timeline import ChannelName, Speaker, Utterance, now

MS_PER_CHAR = 8.0


def speaking_time_s(text: str, ms_per_char: float = MS_PER_CHAR) -> float:
    return len(text) * ms_per_char / 1000


class Voice:
    """The assistant's voice on a call. A sentence is logged the moment it starts, so a claim's time
    is when the customer begins to hear it; queued sentences wait their turn."""

    def __init__(self, log: RunLog, speaker: Speaker = "assistant", ms_per_char: float = MS_PER_CHAR) -> None:
        self._log = log
        self._speaker = speaker
        self._ms_per_char = ms_per_char
        self._queue: deque[tuple[str, dict[str, Any], asyncio.Future[Utterance | None]]] = deque()
        self._current: tuple[Utterance, asyncio.Task[None], float] | None = None
        self._open = True

    @property
    def busy(self) -> bool:
        return self._current is not None or bool(self._queue)

    def say(self, text: str, **fields: Any) -> "asyncio.Future[Utterance | None]":
        """Queue a sentence; the future gives the utterance once said (or cut), None if never started."""
        future: asyncio.Future[Utterance | None] = asyncio.get_running_loop().create_future()
        if not self._open:
            future.set_result(None)
            return future
        self._queue.append((text, fields, future))
        if self._current is None:
            self._next()
        return future

    def _next(self) -> None:
        self._current = None
        if not self._queue or not self._open:
            return
        text, fields, future = self._queue.popleft()
        utterance = self._log.utter(speaker=self._speaker, channel="voice", text=text, **fields)
        task = asyncio.get_running_loop().create_task(self._play(utterance, future))
        self._current = (utterance, task, time.monotonic())

    async def _play(self, utterance: Utterance, future: asyncio.Future[Utterance | None]) -> None:
        try:
            await asyncio.sleep(speaking_time_s(utterance.text, self._ms_per_char))
            utterance.spoken, utterance.completed = utterance.text, True
        finally:
            utterance.ended_at = now()
            self._log.touch()
            if not future.done():
                future.set_result(utterance)
        self._next()

    def cut(self) -> Utterance | None:
        """Stop mid-sentence (the call dropped, or the customer barged in); drop what was queued."""
        for _, _, future in self._queue:
            if not future.done():
                future.set_result(None)
        self._queue.clear()
        if self._current is None:
            return None
        utterance, task, started = self._current
        self._current = None
        chars = int((time.monotonic() - started) * 1000 / self._ms_per_char)
        utterance.spoken = utterance.text[:chars]
        task.cancel()
        return utterance

    def close(self) -> Utterance | None:
        self._open = False
        return self.cut()


class Texter:
    """A text channel: a message is sent whole, at once."""

    def __init__(self, log: RunLog, speaker: Speaker = "assistant") -> None:
        self._log = log
        self._speaker = speaker

    def send(self, text: str, channel: ChannelName = "text", **fields: Any) -> Utterance:
        return self._log.utter(
            speaker=self._speaker,
            channel=channel,
            text=text,
            spoken=text,
            completed=True,
            ended_at=now(),
            **fields,
        )
