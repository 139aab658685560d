"""The tasks a drill asks for: what the customer says, the params, and how a change alters them.

The two sandbox tasks vary with the seed; a user's own kind (`--target-kind`) is a fixed task.
"""

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Params = dict[str, Any]
ROOMS = ("Ada", "Hopper", "Lovelace", "Noether", "Turing", "Curie")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
CURRENCIES = ("EUR", "USD", "GBP")


@dataclass(frozen=True)
class TaskKind:
    name: str  # the settled kind
    label: str  # short, for ids
    service: str | None  # the sandbox service the transcript arm's tool posts to (None: none)
    noun: str
    make_params: Callable[[random.Random], Params]
    change: Callable[[Params, random.Random], Params]
    describe: Callable[[Params], str]
    change_text: Callable[[Params], str]

    def request_text(self, params: Params) -> str:
        return f"I'd like {self.describe(params)}, please."


def _booking(rng: random.Random) -> Params:
    return {"room": rng.choice(ROOMS), "day": rng.choice(DAYS)}


def _another_day(params: Params, rng: random.Random) -> Params:
    return {**params, "day": rng.choice([day for day in DAYS if day != params["day"]])}


def _refund(rng: random.Random) -> Params:
    return {
        "order_id": f"o-{rng.randint(1000, 9999)}",
        "amount": round(rng.uniform(5, 150), 2),
        "currency": rng.choice(CURRENCIES),
    }


def _another_amount(params: Params, rng: random.Random) -> Params:
    return {**params, "amount": round(params["amount"] + rng.uniform(1, 30), 2)}


BOOKING = TaskKind(
    name="room_booking",
    label="book",
    service="bookings",
    noun="booking",
    make_params=_booking,
    change=_another_day,
    describe=lambda p: f"room {p['room']} booked for {p['day']}",
    change_text=lambda p: f"Oh wait, make it {p['day']} instead.",
)
REFUND = TaskKind(
    name="refund",
    label="refund",
    service="refunds",
    noun="refund",
    make_params=_refund,
    change=_another_amount,
    describe=lambda p: f"a refund of {p['amount']:.2f} {p['currency']} for order {p['order_id']}",
    change_text=lambda p: f"Oh wait, make it {p['amount']:.2f} {p['currency']} instead.",
)
SANDBOX_TASKS = (BOOKING, REFUND)


def fixed_task(kind: str, description: str, params: Params, changed: Params) -> TaskKind:
    """A user's kind: the same params every seed (only ids and timing vary)."""
    return TaskKind(
        name=kind,
        label=kind.replace("_", "-")[:24],
        service=None,
        noun=kind,
        make_params=lambda _rng: dict(params),
        change=lambda _params, _rng: dict(changed),
        describe=lambda p: f"to {description} ({json.dumps(p, sort_keys=True)})",
        change_text=lambda p: f"Oh wait, make that {json.dumps(p, sort_keys=True)} instead.",
    )
