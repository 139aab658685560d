"""What a soak run will do, drawn up front from one seed: each action's kind, params, faults and the
channel events around it. The timing of the real run varies; the plan does not."""

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KindPlan:
    service: str
    needs_authorization: bool
    compensable: bool


KINDS: dict[str, KindPlan] = {
    "room_booking": KindPlan("bookings", needs_authorization=True, compensable=True),
    "refund": KindPlan("refunds", needs_authorization=True, compensable=False),
    "refund_nodedup": KindPlan("refunds", needs_authorization=False, compensable=False),
}
KIND_WEIGHTS = {"room_booking": 4, "refund": 3, "refund_nodedup": 3}

# Faults on the write, by weight; None is a clean request.
CREATE_FAULTS: dict[str | None, int] = {
    None: 30,
    "delay": 12,
    "drop_after_apply": 12,
    "fail_before_apply": 10,
    "error_after_apply": 10,
    "hang": 10,
    "hold": 10,
    "late_commit": 10,
    "reject": 4,
}
# Write faults under which lookups may also read a lagging replica (`stale`): the write lands early
# enough that a replica behind by at most STALE_LAG_MAX_S has it before the kinds' 3 s commit horizon
# has passed. A held write may land 5 s late: the service would break its own horizon.
STALE_LOOKUPS_WITH = frozenset(
    {None, "delay", "drop_after_apply", "error_after_apply", "late_commit", "reject"}
)
STALE_LAG_MAX_S = 1.5
ERROR_STATUSES = (500, 502, 503)
POLL_BACKOFF = 1.3
POLL_MAX_S = 10.0


@dataclass(frozen=True)
class Fault:
    op: str  # create | lookup | cancel
    mode: str
    extra: dict[str, Any] = field(default_factory=dict)
    release_after_s: float | None = None  # hold faults: when the run lets them go

    @property
    def label(self) -> str:
        """op:mode, with a delayed write that lookups cannot see named for what it is."""
        return f"{self.op}:{'late_commit' if self.extra.get('unseen') else self.mode}"

    def body(self, service: str, match_key: str) -> dict[str, Any]:
        return {"service": service, "op": self.op, "mode": self.mode, "match_key": match_key, **self.extra}


@dataclass(frozen=True)
class Event:
    at_s: float  # after the action was created
    type: str  # get | authorize | cancel | reconcile | presented | handoff | interrupted | channel_*


@dataclass(frozen=True)
class ActionPlan:
    index: int
    operation_id: str
    conversation_id: str
    kind: str
    params: dict[str, Any]
    authorized: bool
    create_wait_s: float
    start_s: float
    lifetime_s: float
    faults: tuple[Fault, ...]
    events: tuple[Event, ...]
    # Settling at the end: what to do with an action still waiting for its go-ahead.
    authorize_at_end: bool

    @property
    def service(self) -> str:
        return KINDS[self.kind].service


def _weighted(rng: random.Random, weights: dict[Any, int]) -> Any:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _params(rng: random.Random, kind: str) -> dict[str, Any]:
    if kind == "room_booking":
        return {"room": rng.choice(["Ada", "Grace", "Hopper"]), "day": rng.choice(["Mon", "Tue", "Wed"])}
    return {
        "order_id": f"o-{rng.randrange(10**6)}",
        "amount": round(rng.uniform(1, 200), 2),
        "currency": "EUR",
    }


def _create_fault(rng: random.Random) -> Fault | None:
    mode = _weighted(rng, CREATE_FAULTS)
    if mode is None:
        return None
    if mode == "delay":  # around the 1 s dispatch timeout: some answer in time, some are lost to it
        return Fault("create", mode, {"delay_s": round(rng.uniform(0.1, 2.5), 2)})
    if mode in ("fail_before_apply", "error_after_apply"):
        return Fault("create", mode, {"status": rng.choice(ERROR_STATUSES)})
    if mode == "hang":
        return Fault("create", mode, {"delay_s": round(rng.uniform(1, 4), 2), "apply": rng.random() < 0.5})
    if mode == "late_commit":  # lands after the 1 s timeout; lookups answer 404 until then
        return Fault("create", "delay", {"delay_s": round(rng.uniform(1.2, 2.0), 2), "unseen": True})
    if mode == "hold":
        apply = rng.random() < 0.5
        return Fault("create", mode, {"apply": apply}, release_after_s=round(rng.uniform(0.3, 5), 2))
    return Fault("create", mode)  # drop_after_apply, reject


def _side_faults(rng: random.Random, kind: str, cancelled: bool, write: Fault | None) -> list[Fault]:
    faults = []
    if rng.random() < 0.25:
        choice = rng.random()
        write_mode = write.label.split(":")[1] if write else None
        if choice < 0.45:
            faults.append(Fault("lookup", "fail_before_apply", {"status": 503, "count": rng.randint(1, 3)}))
        elif choice < 0.75 or write_mode not in STALE_LOOKUPS_WITH:
            faults.append(Fault("lookup", "delay", {"delay_s": round(rng.uniform(0.5, 2), 2)}))
        else:
            lag = round(rng.uniform(0.3, STALE_LAG_MAX_S), 2)
            faults.append(Fault("lookup", "stale", {"delay_s": lag, "count": rng.randint(1, 3)}))
    # A reversal is sent only when a confirmed booking is cancelled: fault those that will be.
    if KINDS[kind].compensable and cancelled and rng.random() < 0.6:
        mode = rng.choice(["fail_before_apply", "error_after_apply", "drop_after_apply", "delay"])
        extra = {"delay_s": round(rng.uniform(0.5, 2), 2)} if mode == "delay" else {}
        faults.append(Fault("cancel", mode, extra))
    return faults


# Channel events and controls: (type, probability that an action sees one).
EVENT_ODDS = {
    "cancel": 0.25,
    "interrupted": 0.3,
    "channel_closed": 0.3,
    "channel_opened": 0.3,
    "reconcile": 0.2,
    "presented": 0.3,
    "handoff": 0.3,
}


def _events(rng: random.Random, lifetime_s: float, waits_for_go_ahead: bool, poll_s: float) -> list[Event]:
    events = [
        Event(round(rng.uniform(0, lifetime_s), 3), kind)
        for kind, p in EVENT_ODDS.items()
        if rng.random() < p
    ]
    if waits_for_go_ahead and rng.random() < 0.75:
        events.append(Event(round(rng.uniform(0, lifetime_s * 0.6), 3), "authorize"))
    # A client checks often at first, when things happen, then less and less.
    at, step = rng.uniform(0, poll_s), poll_s
    while at < lifetime_s:
        events.append(Event(round(at, 3), "get"))
        at += rng.uniform(step * 0.5, step * 1.5)
        step = min(step * POLL_BACKOFF, POLL_MAX_S)
    return sorted(events, key=lambda event: event.at_s)


def make_plan(
    seed: int,
    actions: int,
    duration_s: float,
    concurrency: int,
    poll_s: float = 1.5,
    actions_per_conversation: int = 3,
) -> list[ActionPlan]:
    """Actions start at random over the duration and each lives long enough that about
    `concurrency` of them are live at any moment."""
    rng = random.Random(seed)
    conversations = max(1, actions // actions_per_conversation)
    mean_lifetime = min(max(2.0, concurrency * duration_s / actions), duration_s)
    plans = []
    for index in range(actions):
        kind = _weighted(rng, KIND_WEIGHTS)
        needs_go_ahead = KINDS[kind].needs_authorization
        authorized = not needs_go_ahead or rng.random() < 0.4
        lifetime = round(min(duration_s, rng.uniform(0.5, 1.5) * mean_lifetime), 3)
        create_fault = _create_fault(rng)
        events = _events(rng, lifetime, needs_go_ahead and not authorized, poll_s)
        cancelled = any(event.type == "cancel" for event in events)
        side = _side_faults(rng, kind, cancelled, create_fault)
        faults = ([create_fault] if create_fault else []) + side
        plans.append(
            ActionPlan(
                index=index,
                operation_id=f"soak-{seed}-{index}",
                conversation_id=f"soak-{seed}-c{rng.randrange(conversations)}",
                kind=kind,
                params=_params(rng, kind),
                authorized=authorized,
                create_wait_s=rng.choice([0.0, 0.0, 0.5, 2.0]),
                start_s=round(rng.uniform(0, max(0.0, duration_s - lifetime)), 3),
                lifetime_s=lifetime,
                faults=tuple(faults),
                events=tuple(events),
                authorize_at_end=rng.random() < 0.5,
            )
        )
    return sorted(plans, key=lambda plan: plan.start_s)


def planned_faults(plans: list[ActionPlan]) -> dict[str, int]:
    return dict(Counter(fault.label for plan in plans for fault in plan.faults))


def planned_events(plans: list[ActionPlan]) -> dict[str, int]:
    return dict(Counter(event.type for plan in plans for event in plan.events))
