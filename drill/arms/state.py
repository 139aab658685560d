"""Arm (b), `state`: the same agent continuing through settled's API only.

It records the action when proposing it, authorizes on consent (`/authorize`), amends on a change
(`/amend`, which voids the old consent), cancels with `/cancel`, reports channel events, records what
it presented (`/presented`), and in the text channel reads `/handoff` and `/reconcile?wait=`. Every
sentence it says is settled's `say`, verbatim, with the action's `claim` (or "prompt" while settled
waits for the customer's go-ahead). It never talks to the business service.

A voice turn waits briefly for a verified outcome (`/authorize?wait=`: a synchronous tool call with
a bound) and then says what is known; it announces a later outcome once it is settled.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from settled.drill.arms import Background
from settled.drill.call import Texter, Voice
from settled.drill.plan import Params, Scenario
from settled.drill.timeline import Claim, DrillTimeout, RunLog, Utterance

from settled.client import EventType, SettledAPIError, SettledClient
from settled.domain.models import ActionStatus, Channel
from settled.domain.states import SETTLED, State

# -- reading settled's ActionStatus ----------------------------------------------------------------

T = TypeVar("T")


class UnexpectedAnswer(Exception):
    """settled answered something the arm cannot go on from (the run fails with it)."""


def waiting_for_user(status: ActionStatus) -> bool:
    return status.state == State.REQUESTED and not status.authorized


def reversing(status: ActionStatus) -> bool:
    """Confirmed, cancel requested, and a compensation still under way (not refused, not impossible)."""
    too_late = any(entry.event == "cancel_too_late" for entry in status.log)
    return (
        status.state == State.CONFIRMED
        and status.cancel_requested
        and not status.compensated
        and status.reason is None
        and not too_late
    )


def at_rest(status: ActionStatus) -> bool:
    return (status.state in SETTLED and not reversing(status)) or waiting_for_user(status)


def changed(told: tuple[Any, ...], status: ActionStatus) -> bool:
    return situation(status) != told


def claim_of(status: ActionStatus) -> Claim:
    return "prompt" if waiting_for_user(status) else status.claim


def situation(status: ActionStatus) -> tuple[Any, ...]:
    """What a sentence about the action depends on: the same situation is not announced twice."""
    return (status.state, status.authorized, status.cancel_requested, status.compensated, status.say)


# -- the arm ---------------------------------------------------------------------------------------

SYNC_WAIT_S = 1.0  # how long a voice turn waits for the business system before speaking
TEXT_WAIT_S = 5.0
POLL_S = 0.05
NARRATE_POLL_S = 0.1
FOLLOW_UP_S = 10.0
SETTLE_S = 15.0


class StateArm:
    name = "state"

    def __init__(self, scenario: Scenario, log: RunLog, settled: SettledClient) -> None:
        self.scenario = scenario
        self.log = log
        self.settled = settled
        self.voice = Voice(log)
        self.text = Texter(log)
        self.background = Background()
        self.notes: list[str] = []  # what settled did that looked wrong, for the report
        self._turn: list[Utterance] = []
        self._announced: tuple[Any, ...] | None = None
        self._narrator: asyncio.Task[None] | None = None
        self._presenting: list[asyncio.Task[None]] = []
        self._delivered: set[str] = set()  # sentences a channel finished presenting

    @property
    def op(self) -> str:
        return self.scenario.task_id

    # -- the API -------------------------------------------------------------------------------

    async def _timed(self, route: str, call: Awaitable[T], wait: float | None = None) -> T:
        """One latency sample per call that settled answered, refusals included, by route."""
        label = route + ("?wait" if wait else "")
        started = time.monotonic()
        try:
            answer = await call
        except SettledAPIError:
            self.log.sample((time.monotonic() - started) * 1000, "api", label)
            raise
        self.log.sample((time.monotonic() - started) * 1000, "api", label)
        return answer

    async def _status(self) -> ActionStatus:
        return await self._timed("GET /v1/actions/{id}", self.settled.get(self.op))

    async def _control(
        self, control: str, call: Awaitable[ActionStatus], wait: float | None = None
    ) -> ActionStatus:
        try:
            return await self._timed(f"POST /v1/actions/{{id}}/{control}", call, wait)
        except SettledAPIError as error:
            if error.status != 409:
                raise
            # Refused (e.g. already dispatched): the record says why.
            self.notes.append(f"{control} refused: {error.code}")
            return await self._status()

    async def _event(self, type_: EventType, channel: Channel, reason: str | None = None) -> None:
        event = self.settled.conversation_event(self.scenario.conversation_id, type_, channel, reason)
        await self._timed("POST /v1/conversations/{id}/events", event)

    async def _present(self, channel: Channel, spoken: Utterance, said: ActionStatus) -> None:
        if spoken.completed:
            self._delivered.add(spoken.text)
        call = self.settled.presented(self.op, channel, spoken.spoken, spoken.completed)
        presented = (await self._control("presented", call)).presented
        if presented is not None and presented.state != said.state:
            # `presented.state` is the state settled has when the record arrives, which may already
            # be a later one than the sentence was about.
            self.notes.append(
                f"presented: said while {said.state}, recorded as presented in state {presented.state}"
            )

    def _authorized(self, status: ActionStatus, started: float) -> None:
        if status.authorized:
            self.log.mark("consent_recorded", status.params)
        if status.state == "confirmed" and status.attempts == 1:
            self.log.sample((time.monotonic() - started) * 1000)

    # -- voice ---------------------------------------------------------------------------------

    def _announce(self, status: ActionStatus) -> None:
        # A reversal under way is waited out, not announced: "done" would be stale within milliseconds.
        if situation(status) == self._announced or reversing(status):
            return
        self._announced = situation(status)
        future = self.voice.say(status.say, claim=claim_of(status), reports_outcome=status.state in SETTLED)

        async def presented() -> None:
            spoken = await future
            if spoken is not None:
                await self._present("voice", spoken, status)

        self._presenting.append(self.background.spawn(presented()))

    async def _narrate(self) -> None:
        """Announce each settled outcome once, as it comes (nothing transient: a reversal under way is
        waited out rather than announced as done)."""
        while True:
            status = await self._status()
            if status.state in SETTLED:
                self._announce(status)
            await asyncio.sleep(NARRATE_POLL_S)

    def _watch(self) -> None:
        if self._narrator is None:
            self._narrator = self.background.spawn(self._narrate())

    async def _create(self) -> None:
        scenario = self.scenario
        # The operation id is derived from the task: a retry of this call reuses it.
        create = self.settled.create_action(
            scenario.conversation_id, scenario.kind.name, scenario.params, operation_id=self.op
        )
        status = await self._timed("POST /v1/actions", create)
        self._announce(status)

    async def _authorize(self) -> None:
        started = time.monotonic()
        authorize = self.settled.authorize(self.op, "caller", wait=SYNC_WAIT_S)
        status = await self._control("authorize", authorize, SYNC_WAIT_S)
        self._authorized(status, started)
        self._announce(status)
        self._watch()

    async def _amend(self, params: Params) -> None:
        self._announce(await self._control("amend", self.settled.amend(self.op, params)))

    async def _cancel(self) -> None:
        cancel = self.settled.cancel(self.op, "caller", "the customer asked")
        status = await self._control("cancel", cancel)
        self.log.mark("cancel_handled")
        self._announce(status)
        self._watch()

    # -- text ----------------------------------------------------------------------------------

    def _send(self, text: str, status: ActionStatus) -> None:
        said = self.text.send(text, claim=claim_of(status), reports_outcome=status.state in SETTLED)
        self._presenting.append(self.background.spawn(self._present("text", said, status)))

    async def _until(self, done: Callable[[ActionStatus], bool], timeout_s: float) -> ActionStatus:
        deadline = time.monotonic() + timeout_s
        status = await self._status()
        while not done(status) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            status = await self._status()
        return status

    async def _follow_up(self, status: ActionStatus) -> None:
        """After "sent, not confirmed, checking": look it up now, and say the verified answer."""
        deadline = time.monotonic() + FOLLOW_UP_S
        told = situation(status)
        while claim_of(status) in ("unknown", "in_progress") and time.monotonic() < deadline:
            if status.state in ("running", "unknown"):
                reconcile = self.settled.reconcile(self.op, wait=TEXT_WAIT_S)
                status = await self._control("reconcile", reconcile, TEXT_WAIT_S)
            if situation(status) == told:  # a coalesced reconcile answers at once: watch instead
                status = await self._until(partial(changed, told), deadline - time.monotonic())
            if situation(status) != told:
                told = situation(status)
                self._send(status.say, status)

    async def _report(self) -> None:
        handoff = await self._timed(
            "GET /v1/conversations/{id}/handoff", self.settled.handoff(self.scenario.conversation_id)
        )
        mine = [action for action in handoff.actions if action.operation_id == self.op]
        if not mine:
            raise UnexpectedAnswer(f"the handoff does not list {self.op}")
        status = mine[-1]
        if reversing(status):
            status = await self._until(lambda s: not reversing(s), FOLLOW_UP_S)
            self._send(status.say, status)
        else:
            # The handoff's say is "" when the outcome was already fully presented: then the
            # action's own sentence answers the question.
            if not handoff.say and status.state in SETTLED and status.say not in self._delivered:
                self.notes.append(
                    f"handoff say was empty, but no channel had finished saying the {status.state} outcome"
                )
            self._send(handoff.say or status.say, status)
        await self._follow_up(status)

    async def _go_ahead(self) -> None:
        started = time.monotonic()
        authorize = self.settled.authorize(self.op, "customer in text", wait=TEXT_WAIT_S)
        status = await self._control("authorize", authorize, TEXT_WAIT_S)
        self._authorized(status, started)
        self._send(status.say, status)
        await self._follow_up(status)

    # -- the arm protocol ----------------------------------------------------------------------

    async def open_voice(self) -> None:
        await self._event("channel_opened", "voice")

    def hear(self, turn: list[Utterance]) -> None:
        self._turn = turn

    async def respond(self) -> None:
        intents = [u.intent for u in self._turn]
        changes = [u for u in self._turn if u.intent == "change"]
        if "cancel" in intents:
            self.background.spawn(self._cancel())
        elif changes:
            # A change voids any consent given before it: amend, and settled asks again.
            self.background.spawn(self._amend(dict(changes[-1].params or {})))
        elif "consent" in intents:
            self.background.spawn(self._authorize())
        elif "request" in intents:
            self.background.spawn(self._create())

    async def drop_call(self) -> None:
        if self._narrator is not None:
            self._narrator.cancel()
        cut = self.voice.close()
        await asyncio.gather(
            *self._presenting, return_exceptions=True
        )  # the cut sentence is recorded as not finished
        if cut is not None:
            await self._event("interrupted", "voice")
        await self._event("channel_closed", "voice", reason="dropped")

    async def open_text(self) -> None:
        await self._event("channel_opened", "text")

    async def answer(self, message: Utterance) -> None:
        if message.intent == "go_ahead":
            await self._go_ahead()
        else:
            await self._report()

    async def settle(self) -> None:
        status = await self._until(at_rest, SETTLE_S)
        if not at_rest(status):
            raise DrillTimeout(f"{self.op} still {status.state} after {SETTLE_S:g}s")
        await asyncio.gather(*self._presenting, return_exceptions=True)
        self.background.raise_first()

    async def close(self) -> None:
        self.voice.close()
        await self.background.close()
