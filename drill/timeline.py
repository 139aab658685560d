"""What was said in one run, when, and what it claimed: the arm-side half of the evidence.

`Timeline` is pure data (no I/O), so metrics can be computed, and tested, on hand-made timelines.
`RunLog` is the live log around it: the arms and the scripted caller write to it, and the caller
waits on it for the moments a cut needs ("the confirmation has started", "the write is held").
"""

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

Claim = Literal["done", "not_done", "unknown", "in_progress", "prompt"]
DEFINITIVE: frozenset[str] = frozenset({"done", "not_done"})
Speaker = Literal["customer", "assistant"]
ChannelName = Literal["voice", "text"]
Intent = Literal["request", "consent", "change", "cancel", "ask", "go_ahead", "followup"]
MarkName = Literal[
    "consent_recorded",
    "consent_turn_end",
    "tool_invoked",
    "tool_answered",
    "cancel_handled",
    "released",
    "cut",
    "text_opened",
]


def now() -> datetime:
    return datetime.now(UTC)


class Utterance(BaseModel):
    at: datetime  # when it started (assistant) or was heard in full (customer)
    speaker: Speaker
    channel: ChannelName
    text: str  # what was meant to be said
    spoken: str = ""  # what was actually said: shorter when cut
    completed: bool = False
    ended_at: datetime | None = None  # None while still being spoken
    claim: Claim | None = None  # assistant only
    intent: Intent | None = None  # customer only
    params: dict[str, Any] | None = None  # customer: the params a request/consent/change refers to
    reports_outcome: bool = False  # assistant: reports an answer the business system gave


class Mark(BaseModel):
    at: datetime
    name: MarkName
    params: dict[str, Any] | None = None


class Sample(BaseModel):
    """One latency measurement (milliseconds). `write`: from sending a write to knowing it was
    confirmed; `api`: one call to settled's API (`label` names the route)."""

    name: Literal["write", "api"]
    ms: float
    label: str | None = None


class Timeline(BaseModel):
    utterances: list[Utterance] = Field(default_factory=list)
    marks: list[Mark] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)

    def said_by(self, speaker: Speaker, channel: ChannelName | None = None) -> list[Utterance]:
        return [u for u in self.utterances if u.speaker == speaker and channel in (None, u.channel)]

    def first_mark(self, name: MarkName) -> Mark | None:
        return next((mark for mark in self.marks if mark.name == name), None)


# -- the live log of a run -------------------------------------------------------------------------

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
