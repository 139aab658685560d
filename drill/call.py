"""The call: simulated speech and the scripted customer.

Sentences take time to say, one at a time, and a cut stops one mid-sentence. Time is compressed (a
few milliseconds per character, several times faster than real speech) so a full matrix runs in
minutes; the order of events, which is what the drill is about, is unchanged.

The caller is one customer, with the same words and the same pacing for both arms. It speaks, waits
for the moment its cut needs (seen in the run log, never guessed by a timer), drops the call there,
and continues in text: "did you do it?", and "go ahead" when asked for it.
"""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from settled.drill.arms import Arm
from settled.drill.bench import Bench
from settled.drill.plan import Scenario
from settled.drill.timeline import (
    DEFINITIVE,
    ChannelName,
    DrillTimeout,
    Intent,
    RunLog,
    Speaker,
    Timeline,
    Utterance,
    now,
)

# -- simulated speech ------------------------------------------------------------------------------

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


# -- the scripted caller ---------------------------------------------------------------------------

WAIT_S = 15.0
TEXT_DEADLINE_S = 15.0
MAX_GO_AHEADS = 2
Line = tuple[Intent, str, dict[str, Any] | None]


def _spoken_after(timeline: Timeline, at: datetime) -> list[Utterance]:
    return [u for u in timeline.said_by("assistant", "voice") if u.at >= at]


class Caller:
    def __init__(self, scenario: Scenario, arm: Arm, log: RunLog, bench: Bench) -> None:
        self.s = scenario
        self.arm = arm
        self.log = log
        self.bench = bench

    # -- speaking ------------------------------------------------------------------------------

    async def _voice_turn(self, lines: list[Line], gap_s: float = 0.0) -> list[Utterance]:
        """Say a turn (each line logged when heard in full); the agent hears it at its end."""
        turn = []
        for index, (intent, text, params) in enumerate(lines):
            if index:
                await asyncio.sleep(gap_s)
            await asyncio.sleep(speaking_time_s(text))
            turn.append(self._utter("voice", intent, text, params))
        self.arm.hear(turn)
        return turn

    def _utter(
        self, channel: ChannelName, intent: Intent, text: str, params: dict[str, Any] | None
    ) -> Utterance:
        return self.log.utter(
            speaker="customer",
            channel=channel,
            text=text,
            spoken=text,
            completed=True,
            ended_at=now(),
            intent=intent,
            params=dict(params) if params is not None else None,
        )

    # -- waiting for moments -------------------------------------------------------------------

    async def _first_words(self, after: datetime) -> Utterance:
        def probe(timeline: Timeline) -> Utterance | None:
            spoken = _spoken_after(timeline, after)
            return spoken[0] if spoken else None

        return await self.log.until(probe, WAIT_S, "the assistant's first words")

    async def _outcome(self, after: datetime, claims: frozenset[str]) -> Utterance:
        def probe(timeline: Timeline) -> Utterance | None:
            found = [u for u in _spoken_after(timeline, after) if u.reports_outcome and u.claim in claims]
            return found[0] if found else None

        return await self.log.until(probe, WAIT_S, "the assistant to say the outcome")

    async def _quiet(self, after: datetime) -> None:
        def probe(timeline: Timeline) -> bool:
            spoken = _spoken_after(timeline, after)
            return bool(spoken) and all(u.ended_at is not None for u in spoken)

        await self.log.until(probe, WAIT_S, "the assistant to finish speaking")

    # -- the cuts: what happens between the consent turn and the drop ---------------------------

    async def _c0(self, after: datetime) -> None:
        await self._outcome(after, DEFINITIVE)
        await self._quiet(after)
        await asyncio.sleep(self.s.pauses.hangup_after)

    async def _tools_answered(self) -> None:
        """Until every tool call the agent made has had its answer (or lost it): an "in transit" cut
        must come after the write reached the service, however busy the machine is."""

        def probe(timeline: Timeline) -> bool:
            names = [mark.name for mark in timeline.marks]
            return names.count("tool_answered") >= names.count("tool_invoked")

        await self.log.until(probe, WAIT_S, "the agent's tool calls to be answered")

    async def _early_cut(self, after: datetime) -> None:
        await self._first_words(after)
        await self._tools_answered()
        await asyncio.sleep(self.s.pauses.cut_after)

    async def _c4(self, after: datetime) -> None:
        outcome = await self._outcome(after, frozenset({"done"}))
        heard = self.s.pauses.partial * speaking_time_s(outcome.text)
        await asyncio.sleep(max(0.0, heard - (now() - outcome.at).total_seconds()))

    async def _c5(self, after: datetime) -> None:
        await self.bench.wait_held(self.s)
        await asyncio.sleep(self.s.pauses.cancel_after)
        await self._voice_turn([("cancel", "No, wait, cancel that!", None)])
        await self.arm.respond()
        await self.log.until(lambda t: t.first_mark("cancel_handled"), WAIT_S, "the cancel to be handled")
        await asyncio.sleep(self.s.pauses.release_after)
        await self.bench.release(self.s)
        self.log.mark("released")
        await self.bench.wait_write_done(self.s)
        await asyncio.sleep(self.s.pauses.hangup_after)

    def _cut_step(self) -> Callable[[datetime], Awaitable[None]]:
        return {
            "C0": self._c0,
            "C2": self._early_cut,
            "C3": self._early_cut,
            "C4": self._c4,
            "C5": self._c5,
            "C6": self._early_cut,
            "C7": self._early_cut,
        }[self.s.cut.id]

    # -- the script ----------------------------------------------------------------------------

    async def run(self) -> None:
        s, pauses = self.s, self.s.pauses
        await self.arm.open_voice()
        request = await self._voice_turn([("request", s.kind.request_text(s.params), s.params)])
        await self.arm.respond()
        await self._quiet(request[-1].at)
        await asyncio.sleep(pauses.think)
        lines: list[Line] = [("consent", "Yes, go ahead.", s.params)]
        if s.cut.id == "C6":
            lines.append(("change", s.kind.change_text(s.changed), s.changed))
        await self._voice_turn(lines, gap_s=pauses.change_gap)
        turn_end = self.log.mark("consent_turn_end").at
        if s.cut.id != "C1":  # C1: the line drops before the agent acts on the "yes"
            await self.arm.respond()
            await self._cut_step()(turn_end)
        self.log.mark("cut")
        await self.arm.drop_call()
        await asyncio.sleep(pauses.reconnect)
        await self.arm.open_text()
        self.log.mark("text_opened")
        await asyncio.sleep(pauses.ask_after)
        await self._text_conversation()

    async def _text_conversation(self) -> None:
        asked = self._utter("text", "ask", "Did you do it?", None)
        await self.arm.answer(asked)
        deadline = time.monotonic() + TEXT_DEADLINE_S
        go_aheads = 0
        while True:
            replies = [u for u in self.log.timeline.said_by("assistant", "text") if u.at >= asked.at]
            if not replies:
                raise DrillTimeout("the assistant did not reply in text")
            last = replies[-1]
            if last.claim == "prompt" and go_aheads < MAX_GO_AHEADS:
                go_aheads += 1
                await self.arm.answer(self._utter("text", "go_ahead", "Yes, go ahead.", self.s.wanted))
                continue
            if last.claim in DEFINITIVE or time.monotonic() > deadline:
                return
            await asyncio.sleep(self.s.pauses.followup)
            await self.arm.answer(self._utter("text", "followup", "Any news?", None))
