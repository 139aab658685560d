"""What a drill runs, decided before anything runs: the cuts (the moments a call can end badly, each
with the fault the business system meets), the tasks (what the customer says, the params, and how a
change alters them), every run's scenario, and the options of `settled drill` that choose them.

A scenario's script inputs derive from the seed alone: ids, params, the order of the kinds and the
small timing jitter of the scripted turns; both arms of a scenario get the same values. The two
sandbox tasks vary with the seed; a user's own kind (`--target-kind`) is a fixed task. The options
are checked once: every impossible combination says why. Standard library only, so `settled`'s
parser can add the drill's flags in the light install.
"""

import argparse
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# -- the cuts --------------------------------------------------------------------------------------

FaultMode = Literal["drop_after_apply", "fail_before_apply", "hold", "late_commit"]
# C7: the write reaches the service this long after the client's timeout, and lookups see nothing of
# it until then (a queue, a request still being processed elsewhere): a 404 in between proves nothing.
LATE_COMMIT_AFTER_TIMEOUT_S = 1.0
# C5's two sweeps: released without applying (the cancel won) or applied (the write won).
Variant = Literal["before_commit", "after_commit"]


@dataclass(frozen=True)
class Cut:
    id: str
    title: str
    fault: FaultMode | None = None


CUTS: dict[str, Cut] = {
    cut.id: cut
    for cut in (
        Cut("C0", "normal uninterrupted call"),
        Cut("C1", "cut after consent, before dispatch"),
        Cut("C2", "in transit, applied, response lost", "drop_after_apply"),
        Cut("C3", "in transit, not applied", "fail_before_apply"),
        Cut("C4", "confirmed, sentence cut before it finished"),
        Cut("C5", "explicit cancel while the write is in flight", "hold"),
        Cut("C6", "a parameter changed after consent"),
        Cut("C7", "in transit, the service still committing after the client gave up", "late_commit"),
    )
}


def parse_cuts(text: str) -> list[Cut]:
    names = [part.strip().upper() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in CUTS]
    if unknown or not names:
        raise ValueError(f"unknown cut(s) {unknown or text!r}: choose from {', '.join(CUTS)}")
    return [CUTS[name] for name in dict.fromkeys(names)]


# -- the tasks -------------------------------------------------------------------------------------

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


# -- the scenarios ---------------------------------------------------------------------------------

ARMS = ("transcript", "state")


@dataclass(frozen=True)
class Pauses:
    """The scripted caller's pacing, in seconds (deliberate, part of the scenario)."""

    think: float  # before answering the proposal
    change_gap: float  # C6: between "yes" and the change, inside one turn
    cut_after: float  # C2, C3, C6: from the assistant's first words to the drop
    partial: float  # C4: the fraction of the confirmation heard before the drop
    cancel_after: float  # C5: from the write being held to "cancel that"
    release_after: float  # C5: from the cancel being handled to the release
    hangup_after: float  # C0, C5: from the last sentence to the drop
    reconnect: float  # from the drop to the text channel opening
    ask_after: float  # from the text channel opening to "did you do it?"
    followup: float  # between text follow-ups while nothing definitive was said


@dataclass(frozen=True)
class Scenario:
    seed: int
    cut: Cut
    kind: TaskKind
    arm: str
    task_id: str
    params: Params
    changed: Params
    variant: Variant | None
    pauses: Pauses

    @property
    def conversation_id(self) -> str:
        return f"{self.task_id}.conv"

    @property
    def wanted(self) -> Params:
        """What the customer wants in the end (C6 changes it)."""
        return self.changed if self.cut.id == "C6" else self.params


def _pauses(rng: random.Random) -> Pauses:
    return Pauses(
        think=rng.uniform(0.15, 0.3),
        change_gap=rng.uniform(0.05, 0.12),
        cut_after=rng.uniform(0.05, 0.15),
        partial=rng.uniform(0.3, 0.7),
        cancel_after=rng.uniform(0.1, 0.2),
        release_after=rng.uniform(0.1, 0.2),
        hangup_after=rng.uniform(0.1, 0.2),
        reconnect=rng.uniform(0.2, 0.4),
        ask_after=rng.uniform(0.1, 0.25),
        followup=rng.uniform(0.3, 0.5),
    )


def kinds_in_order(seed: int, kinds: tuple[TaskKind, ...]) -> list[TaskKind]:
    ordered = list(kinds)
    random.Random(f"order:{seed}").shuffle(ordered)
    return ordered


def plan(
    seeds: int, cuts: list[Cut], arms: list[str], kinds: tuple[TaskKind, ...], nonce: str
) -> list[Scenario]:
    """Every run, in the order they are started: seed by seed, its kinds in the seed's order."""
    scenarios = []
    for seed in range(1, seeds + 1):
        for kind in kinds_in_order(seed, kinds):
            # C5's sweep alternates with the seed and differs between the kinds of one seed.
            variant: Variant = ("before_commit", "after_commit")[(seed + kinds.index(kind)) % 2]
            for cut in cuts:
                rng = random.Random(f"{seed}:{cut.id}:{kind.name}")
                params = kind.make_params(rng)
                changed = kind.change(params, rng)
                pauses = _pauses(rng)
                for arm in arms:
                    scenarios.append(
                        Scenario(
                            seed=seed,
                            cut=cut,
                            kind=kind,
                            arm=arm,
                            task_id=f"d{nonce}-{seed}-{cut.id}-{kind.label}-{arm[0]}",
                            params=params,
                            changed=changed,
                            variant=variant if cut.fault == "hold" else None,
                            pauses=pauses,
                        )
                    )
    return scenarios


# -- the options -----------------------------------------------------------------------------------

DEFAULT_SEEDS = 3
DEFAULT_CONCURRENCY = 4


class UsageError(ValueError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("drill-results"), help="where the results go")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds per cut and kind")
    parser.add_argument("--cuts", default=",".join(CUTS), help="comma-separated, e.g. C0,C2")
    parser.add_argument("--arms", default=None, help="transcript,state (target mode: state)")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="runs at a time")
    parser.add_argument("--api-url", help="use a running stack's API (with --sandbox-url)")
    parser.add_argument("--sandbox-url", help="the running stack's sandbox")
    parser.add_argument("--target-kind", help="drill a kind of your own service (with --config)")
    parser.add_argument("--config", type=Path, help="the kinds file that declares --target-kind")
    parser.add_argument("--params", help="target mode: the params to request, as JSON")
    parser.add_argument("--changed-params", help="target mode: the params after C6's change, as JSON")


@dataclass(frozen=True)
class Options:
    out: Path
    seeds: int
    cuts: list[Cut]
    arms: list[str]
    concurrency: int
    api_url: str | None
    sandbox_url: str | None
    target_kind: str | None
    config: Path | None
    params: dict[str, Any] | None
    changed_params: dict[str, Any] | None


def _json_object(text: str | None, flag: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UsageError(f"{flag}: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: must be a JSON object")
    return value


def parse_options(args: argparse.Namespace) -> Options:
    try:
        cuts = parse_cuts(args.cuts)
    except ValueError as error:
        raise UsageError(str(error)) from None
    target = args.target_kind is not None
    arms = [part.strip() for part in (args.arms or ("state" if target else ",".join(ARMS))).split(",")]
    if not arms or any(arm not in ARMS for arm in arms):
        raise UsageError(f"--arms: choose from {', '.join(ARMS)}")
    if args.seeds < 1 or args.concurrency < 1:
        raise UsageError("--seeds and --concurrency must be at least 1")
    if (args.api_url is None) != (args.sandbox_url is None):
        raise UsageError("--api-url and --sandbox-url go together (a running stack)")
    if target:
        if args.config is None:
            raise UsageError("--target-kind needs --config, the kinds file that declares it")
        if args.api_url:
            raise UsageError("--target-kind starts its own stack (its kinds point at the fault proxy)")
        if arms != ["state"]:
            raise UsageError("--target-kind drills the state arm only (--arms state)")
    elif args.config is not None or args.params or args.changed_params:
        raise UsageError("--config, --params and --changed-params belong to --target-kind")
    return Options(
        out=args.out,
        seeds=args.seeds,
        cuts=cuts,
        arms=list(dict.fromkeys(arms)),
        concurrency=args.concurrency,
        api_url=args.api_url.rstrip("/") if args.api_url else None,
        sandbox_url=args.sandbox_url.rstrip("/") if args.sandbox_url else None,
        target_kind=args.target_kind,
        config=args.config,
        params=_json_object(args.params, "--params"),
        changed_params=_json_object(args.changed_params, "--changed-params"),
    )
