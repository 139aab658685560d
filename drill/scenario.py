"""One run's script inputs, derived from the seed alone: ids, params, the order of the kinds and the
small timing jitter of the scripted turns. Both arms of a scenario get the same values."""

import random
from dataclasses import dataclass

from settled.drill.cuts import Cut, Variant
from settled.drill.tasks import Params, TaskKind

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
