"""The soak's judge is `settled.sandbox.truth`, shared with the drill; this name stays only for the
soak's runner, which still imports it from here."""

from settled.sandbox.truth import SETTLED_STATES, Observation, judge

__all__ = ["SETTLED_STATES", "Observation", "judge"]
