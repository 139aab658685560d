"""settled's series counted from the action workflow (docs/reference.md#metrics, docs/operations.md).

Replay-safe: the SDK records workflow metrics only when the code runs for the first time, so a replayed
task counts nothing twice. Labels are the kind and a state, never an id: bounded by the kinds file.
"""

from datetime import datetime

from temporalio import workflow

from settled.domain.states import State

OUTCOME_SECONDS = "settled_action_outcome_seconds"
# From a quick confirmation to the week automatic lookups run by default.
OUTCOME_BUCKETS_S: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 86400, 7 * 86400,
)  # fmt: skip


def count_transition(kind: str, state: State) -> None:
    workflow.metric_meter().create_counter("settled_action_transitions", "actions entering each state").add(
        1, {"state": state.value, "kind": kind}
    )


def time_outcome(kind: str, state: State, requested_at: datetime, now: datetime) -> None:
    """An action reached a verified outcome (`state`): how long after it was requested."""
    workflow.metric_meter().create_histogram_float(
        OUTCOME_SECONDS, "time from an action's request to its verified outcome", "s"
    ).record(max((now - requested_at).total_seconds(), 0.0), {"kind": kind, "state": state.value})


def count_lookups_stopped(kind: str) -> None:
    """Automatic lookups of an unknown action stopped (`give_up_after_s` passed): only a person,
    `/reconcile` or a conversation event can verify it now."""
    workflow.metric_meter().create_counter(
        "settled_reconciliation_stopped", "unknown actions whose automatic lookups stopped"
    ).add(1, {"kind": kind})
