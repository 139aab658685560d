"""Arm (a), `transcript`: a faithful model of how today's voice frameworks handle a consequential tool.

- The tool call is asynchronous, and the spoken claim comes from the transcript: "I've submitted it"
  the moment the tool is invoked, before any answer.
- An interrupted assistant message is truncated in the transcript to what was spoken.
- When the call drops, the session's pending tool calls are torn down; their results never reach
  the transcript.
- The next channel decides from the transcript alone: a successful tool result in it is a
  confirmation; without one, it invokes the tool again (text channels call tools synchronously).
- The tool posts straight to the business service with a fresh Idempotency-Key per invocation (as
  SDKs generate one per call), so a re-invocation is a new write. The body carries the task id as
  `client_reference` only so the drill can attribute records to the task; the arm never reads it.
- A cancel cancels the local tool task and claims "cancelled"; a parameter change invokes the tool
  with the new params on the consent already given.
"""

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from settled.drill.arms import Background
from settled.drill.call import Texter, Voice
from settled.drill.plan import Params, Scenario
from settled.drill.timeline import RunLog, Utterance

Role = Literal["user", "assistant", "tool_call", "tool_result"]


@dataclass
class Entry:
    role: Role
    utterance: Utterance | None = None  # user and assistant messages
    params: Params | None = None  # tool calls
    call: int | None = None
    ok: bool = False
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """What the transcript holds: for an assistant message, only what was actually spoken."""
        if self.utterance is None:
            return ""
        return self.utterance.spoken if self.utterance.speaker == "assistant" else self.utterance.text


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    body: dict[str, Any]
    error: str | None = None


class TranscriptArm:
    name = "transcript"

    def __init__(self, scenario: Scenario, log: RunLog, service: httpx.AsyncClient) -> None:
        if scenario.kind.service is None:
            raise ValueError(f"kind {scenario.kind.name} has no sandbox service for the transcript arm")
        self.scenario = scenario
        self.log = log
        self.service = service
        self.transcript: list[Entry] = []
        self.voice = Voice(log)
        self.text = Texter(log)
        self.background = Background()
        self._turn: list[Utterance] = []
        self._calls: dict[int, asyncio.Task[None]] = {}
        self._keys = random.Random(f"keys:{scenario.task_id}")  # fresh per call, reproducible per seed

    # -- reading the transcript ----------------------------------------------------------------

    def _users(self) -> list[Utterance]:
        return [e.utterance for e in self.transcript if e.role == "user" and e.utterance is not None]

    def _latest_params(self) -> Params:
        wished = [u.params for u in self._users() if u.intent in ("request", "change") and u.params]
        return dict(wished[-1]) if wished else dict(self.scenario.params)

    def _consented(self) -> bool:
        return any(u.intent in ("consent", "go_ahead") for u in self._users())

    def _since_last_call(self) -> list[Entry]:
        calls = [i for i, e in enumerate(self.transcript) if e.role == "tool_call"]
        return self.transcript[calls[-1] :] if calls else []

    def _cancelled(self) -> bool:
        return any(e.utterance.intent == "cancel" for e in self._since_last_call() if e.utterance is not None)

    def _confirmation(self) -> Entry | None:
        results = [e for e in self._since_last_call() if e.role == "tool_result" and e.ok]
        return results[-1] if results else None

    def _call_params(self, call: int | None) -> Params:
        return next((e.params or {} for e in self.transcript if e.role == "tool_call" and e.call == call), {})

    def _say_voice(self, text: str, **fields: Any) -> None:
        entry = Entry("assistant")
        self.transcript.append(entry)
        future = self.voice.say(text, **fields)
        future.add_done_callback(lambda done: setattr(entry, "utterance", done.result()))

    # -- the tool ------------------------------------------------------------------------------

    async def _tool(self, params: Params) -> ToolResult:
        key = str(uuid.UUID(int=self._keys.getrandbits(128), version=4))
        body = {**params, "client_reference": self.scenario.task_id}
        started = time.monotonic()
        try:
            response = await self.service.post(
                f"/{self.scenario.kind.service}", json=body, headers={"Idempotency-Key": key}
            )
        except httpx.HTTPError as error:
            return ToolResult(ok=False, body={}, error=type(error).__name__)
        if response.is_success:
            self.log.sample((time.monotonic() - started) * 1000)
            return ToolResult(ok=True, body=response.json())
        return ToolResult(ok=False, body={}, error=f"HTTP {response.status_code}")

    def _record_call(self, params: Params) -> int:
        call = sum(e.role == "tool_call" for e in self.transcript) + 1
        self.transcript.append(Entry("tool_call", params=params, call=call))
        return call

    def _record_result(self, call: int, result: ToolResult) -> None:
        self.transcript.append(Entry("tool_result", call=call, ok=result.ok, body=result.body))

    def _outcome_text(self, params: Params, result: ToolResult) -> str:
        kind = self.scenario.kind
        if result.ok:
            return f"Done: {kind.describe(params)}. Your reference is {result.body.get('id')}."
        return f"Sorry, that didn't go through ({result.error}): the {kind.noun} was not made."

    async def _voice_call(self, call: int, params: Params) -> None:
        result = await self._tool(params)
        self._record_result(call, result)
        self.log.mark("tool_answered")
        claim = "done" if result.ok else "not_done"
        self._say_voice(self._outcome_text(params, result), claim=claim, reports_outcome=True)

    def _invoke_async(self, params: Params) -> None:
        # The claim comes first, the moment the tool is invoked: that is the asynchronous pattern.
        self._say_voice(f"I've submitted it: {self.scenario.kind.describe(params)}.", claim="done")
        call = self._record_call(params)
        self.log.mark("tool_invoked")
        self._calls[call] = self.background.spawn(self._voice_call(call, params))

    # -- the arm protocol ----------------------------------------------------------------------

    async def open_voice(self) -> None:
        pass

    def hear(self, turn: list[Utterance]) -> None:
        self._turn = turn
        for utterance in turn:
            self.transcript.append(Entry("user", utterance=utterance))
            if utterance.intent in ("consent", "go_ahead"):
                self.log.mark("consent_recorded", utterance.params)  # the transcript is its record

    async def respond(self) -> None:
        intents = {u.intent for u in self._turn}
        if "cancel" in intents:
            for task in self._calls.values():
                task.cancel()
            self.log.mark("cancel_handled")
            self._say_voice("OK, I've cancelled it.", claim="not_done")
        elif "consent" in intents or ("change" in intents and self._consented()):
            self._invoke_async(self._latest_params())
        elif "request" in intents:
            params = self.scenario.params
            self._say_voice(f"Shall I arrange {self.scenario.kind.describe(params)}?", claim="prompt")

    async def drop_call(self) -> None:
        self.voice.close()
        for task in self._calls.values():
            task.cancel()  # the session is torn down with the call

    async def open_text(self) -> None:
        pass

    async def answer(self, message: Utterance) -> None:
        self.hear([message])
        confirmation = self._confirmation()
        if self._cancelled():
            self.text.send("No: you asked me to cancel it, so nothing was done.", claim="not_done")
        elif confirmation is not None:
            params = self._call_params(confirmation.call)
            ref = confirmation.body.get("id")
            self.text.send(
                f"Yes, it's done: {self.scenario.kind.describe(params)} (reference {ref}).", claim="done"
            )
        else:
            # No confirmation in the transcript: the tool is invoked again, synchronously.
            params = self._latest_params()
            call = self._record_call(params)
            result = await self._tool(params)
            self._record_result(call, result)
            claim = "done" if result.ok else "not_done"
            self.text.send(self._outcome_text(params, result), claim=claim, reports_outcome=True)

    async def settle(self) -> None:
        self.background.raise_first()

    async def close(self) -> None:
        self.voice.close()
        await self.background.close()
