"""Reading settled's ActionStatus (JSON) the way the state arm must: what it may say, and when."""

from typing import Any

from settled.drill.timeline import Claim

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
