"""What every framework's tests check of what the caller heard: one place, so the three frameworks
are held to the same rule."""

from settled.models import ActionStatus
from settled.states import State
from tests.adapters.conftest import SentClient


async def owed(settled: SentClient, conversation: str, op: str, verbatim: bool = True) -> ActionStatus:
    """The refund confirmed, its sentence cut: recorded as not completed, and owed to the next channel.
    `verbatim`: the presented text is the `say` itself (LiveKit presents the model's own words)."""
    action = await settled.get(op)
    assert action.state is State.CONFIRMED
    assert action.presented is not None and action.presented.completed is False
    assert action.presented.for_state is State.CONFIRMED
    assert action.business_ref is not None and action.business_ref in action.presented.text
    assert action.presented.text == action.say or not verbatim
    handoff = await settled.handoff(conversation)
    assert handoff.work == "stopped" and handoff.say == action.say
    return action


async def heard_in_full(settled: SentClient, conversation: str, op: str, said_last: str) -> None:
    """The confirmation played to its end, then the caller hung up: recorded as heard, never repeated."""
    action = await settled.get(op)
    assert action.presented is not None and action.presented.completed
    assert action.presented.text == action.say == said_last
    assert (await settled.handoff(conversation)).say == ""
    assert settled.sent == [("channel_opened", None), ("presented", "heard"), ("channel_closed", "hangup")]


async def recorded_heard(settled: SentClient, op: str) -> bool:
    action = await settled.get(op)
    return action.presented is not None and action.presented.completed


async def sent(settled: SentClient, what: tuple[str, str | None]) -> bool:
    return what in settled.sent
