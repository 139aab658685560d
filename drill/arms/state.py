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
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
from settled.drill.arms import Background
from settled.drill.call import Texter, Voice
from settled.drill.plan import Params, Scenario
from settled.drill.timeline import Claim, DrillTimeout, RunLog, Utterance

Status = dict[str, Any]
SETTLED = ("confirmed", "failed", "cancelled")


class SettledApiError(Exception):
    """settled answered with an error the arm cannot go on from (the run fails with it)."""


def route_of(method: str, path: str, wait: float | None) -> str:
    """`POST /v1/actions/{id}/authorize?wait`: the route, without the ids."""
    parts = path.strip("/").split("/")
    if len(parts) >= 3:
        parts[2] = "{id}"
    return f"{method} /{'/'.join(parts)}" + ("?wait" if wait else "")


def waiting_for_user(status: Status) -> bool:
    return status["state"] == "requested" and not status["authorized"]


def reversing(status: Status) -> bool:
    """Confirmed, cancel requested, and a compensation still under way (not refused, not impossible)."""
    too_late = any(entry.get("event") == "cancel_too_late" for entry in status.get("log", []))
    return (
        status["state"] == "confirmed"
        and status["cancel_requested"]
        and not status["compensated"]
        and status["reason"] is None
        and not too_late
    )


def at_rest(status: Status) -> bool:
    return (status["state"] in SETTLED and not reversing(status)) or waiting_for_user(status)


def changed(told: tuple[Any, ...], status: Status) -> bool:
    return situation(status) != told


def claim_of(status: Status) -> Claim:
    claim: Claim = "prompt" if waiting_for_user(status) else status["claim"]
    return claim


def situation(status: Status) -> tuple[Any, ...]:
    """What a sentence about the action depends on: the same situation is not announced twice."""
    return (
        status["state"],
        status["authorized"],
        status["cancel_requested"],
        status["compensated"],
        status["say"],
    )


SYNC_WAIT_S = 1.0  # how long a voice turn waits for the business system before speaking
TEXT_WAIT_S = 5.0
POLL_S = 0.05
NARRATE_POLL_S = 0.1
FOLLOW_UP_S = 10.0
SETTLE_S = 15.0


class StateArm:
    name = "state"

    def __init__(self, scenario: Scenario, log: RunLog, api: httpx.AsyncClient) -> None:
        self.scenario = scenario
        self.log = log
        self.api = api
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

    async def _call(
        self, method: str, path: str, body: dict[str, Any] | None = None, wait: float | None = None
    ) -> httpx.Response:
        params = {"wait": wait} if wait is not None else None
        started = time.monotonic()
        response = await self.api.request(method, path, json=body, params=params)
        self.log.sample((time.monotonic() - started) * 1000, "api", route_of(method, path, wait))
        if response.status_code >= 500 or response.status_code in (400, 404, 422):
            raise SettledApiError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response

    async def _status(self) -> Status:
        status: Status = (await self._call("GET", f"/v1/actions/{self.op}")).json()
        return status

    async def _action(self, control: str, body: dict[str, Any], wait: float | None = None) -> Status:
        response = await self._call("POST", f"/v1/actions/{self.op}/{control}", body, wait)
        if response.status_code == 409:  # refused (e.g. already dispatched): the record says why
            self.notes.append(f"{control} refused: {response.json()['error']['code']}")
            return await self._status()
        status: Status = response.json()
        return status

    async def _event(self, type_: str, channel: str, reason: str | None = None) -> None:
        body = {"type": type_, "channel": channel, "reason": reason}
        await self._call("POST", f"/v1/conversations/{self.scenario.conversation_id}/events", body)

    async def _present(self, channel: str, spoken: Utterance, said: Status) -> None:
        body = {"channel": channel, "text": spoken.spoken, "completed": spoken.completed}
        if spoken.completed:
            self._delivered.add(spoken.text)
        recorded = await self._action("presented", body)
        presented = recorded.get("presented") or {}
        if presented.get("state") not in (None, said["state"]):
            # `presented` has no field for the state the sentence was about: settled stamps the
            # state it has when the record arrives, which may already be a later one.
            self.notes.append(
                f"presented: said while {said['state']}, recorded as presented in state {presented['state']}"
            )

    def _authorized(self, status: Status, started: float) -> None:
        if status["authorized"]:
            self.log.mark("consent_recorded", status["params"])
        if status["state"] == "confirmed" and status["attempts"] == 1:
            self.log.sample((time.monotonic() - started) * 1000)

    # -- voice ---------------------------------------------------------------------------------

    def _announce(self, status: Status) -> None:
        # A reversal under way is waited out, not announced: "done" would be stale within milliseconds.
        if situation(status) == self._announced or reversing(status):
            return
        self._announced = situation(status)
        future = self.voice.say(
            status["say"], claim=claim_of(status), reports_outcome=status["state"] in SETTLED
        )

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
            if status["state"] in SETTLED:
                self._announce(status)
            await asyncio.sleep(NARRATE_POLL_S)

    def _watch(self) -> None:
        if self._narrator is None:
            self._narrator = self.background.spawn(self._narrate())

    async def _create(self) -> None:
        body = {
            "conversation_id": self.scenario.conversation_id,
            "kind": self.scenario.kind.name,
            "params": self.scenario.params,
            "operation_id": self.op,  # derived from the task: a retry of this call reuses it
        }
        status: Status = (await self._call("POST", "/v1/actions", body)).json()
        self._announce(status)

    async def _authorize(self) -> None:
        started = time.monotonic()
        status = await self._action("authorize", {"by": "caller"}, wait=SYNC_WAIT_S)
        self._authorized(status, started)
        self._announce(status)
        self._watch()

    async def _amend(self, params: Params) -> None:
        self._announce(await self._action("amend", {"params": params}))

    async def _cancel(self) -> None:
        status = await self._action("cancel", {"by": "caller", "reason": "the customer asked"})
        self.log.mark("cancel_handled")
        self._announce(status)
        self._watch()

    # -- text ----------------------------------------------------------------------------------

    def _send(self, text: str, status: Status) -> None:
        said = self.text.send(text, claim=claim_of(status), reports_outcome=status["state"] in SETTLED)
        self._presenting.append(self.background.spawn(self._present("text", said, status)))

    async def _until(self, done: Callable[[Status], bool], timeout_s: float) -> Status:
        deadline = time.monotonic() + timeout_s
        status = await self._status()
        while not done(status) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            status = await self._status()
        return status

    async def _follow_up(self, status: Status) -> None:
        """After "sent, not confirmed, checking": look it up now, and say the verified answer."""
        deadline = time.monotonic() + FOLLOW_UP_S
        told = situation(status)
        while claim_of(status) in ("unknown", "in_progress") and time.monotonic() < deadline:
            if status["state"] in ("running", "unknown"):
                status = await self._action("reconcile", {}, wait=TEXT_WAIT_S)
            if situation(status) == told:  # a coalesced reconcile answers at once: watch instead
                status = await self._until(partial(changed, told), deadline - time.monotonic())
            if situation(status) != told:
                told = situation(status)
                self._send(status["say"], status)

    async def _report(self) -> None:
        handoff = (
            await self._call("GET", f"/v1/conversations/{self.scenario.conversation_id}/handoff")
        ).json()
        mine = [action for action in handoff["actions"] if action["operation_id"] == self.op]
        if not mine:
            raise SettledApiError(f"the handoff does not list {self.op}")
        status = mine[-1]
        if reversing(status):
            status = await self._until(lambda s: not reversing(s), FOLLOW_UP_S)
            self._send(status["say"], status)
        else:
            # The handoff's say is "" when the outcome was already fully presented: then the
            # action's own sentence answers the question.
            if not handoff["say"] and status["state"] in SETTLED and status["say"] not in self._delivered:
                self.notes.append(
                    f"handoff say was empty, but no channel had finished saying the {status['state']} outcome"
                )
            self._send(handoff["say"] or status["say"], status)
        await self._follow_up(status)

    async def _go_ahead(self) -> None:
        started = time.monotonic()
        status = await self._action("authorize", {"by": "customer in text"}, wait=TEXT_WAIT_S)
        self._authorized(status, started)
        self._send(status["say"], status)
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
            raise DrillTimeout(f"{self.op} still {status['state']} after {SETTLE_S:g}s")
        await asyncio.gather(*self._presenting, return_exceptions=True)
        self.background.raise_first()

    async def close(self) -> None:
        self.voice.close()
        await self.background.close()
