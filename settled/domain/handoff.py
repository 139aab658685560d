"""What the next channel needs to continue truthfully (docs/reference.md). Pure."""

from typing import Literal

from pydantic import BaseModel, Field

from settled.domain.models import ActionStatus
from settled.domain.states import SETTLED, State

Work = Literal["idle", "continuing", "waiting_for_user", "stopped"]
ChannelState = Literal["unused", "open", "closed"]


class Channels(BaseModel):
    voice: ChannelState = "unused"
    text: ChannelState = "unused"


class Handoff(BaseModel):
    conversation_id: str
    work: Work
    channels: Channels
    actions: list[ActionStatus]
    say: str
    # Beyond the contract: why each channel last closed (hangup, dropped, ended_by_agent, …).
    channel_reasons: dict[str, str] = Field(default_factory=dict)


def _continuing(action: ActionStatus) -> bool:
    if action.state is State.REQUESTED:
        return action.authorized
    return action.state in (State.RUNNING, State.UNKNOWN)


def work_of(actions: list[ActionStatus]) -> Work:
    if not actions:
        return "idle"
    if any(_continuing(action) for action in actions):
        return "continuing"
    if any(action.state is State.REQUESTED and not action.authorized for action in actions):
        return "waiting_for_user"
    return "stopped"


def fully_presented(action: ActionStatus) -> bool:
    """A settled outcome that a channel finished presenting need not be said again.

    Finished means: completed, recorded in this state, and about this state — as the channel says
    (`for_state`), or else as its text shows (it is this state's sentence).
    """
    presented = action.presented
    if action.state not in SETTLED or presented is None or not presented.completed:
        return False
    if presented.state is not action.state:
        return False
    if presented.for_state is not None:
        return presented.for_state is action.state
    return presented.text.strip() == action.say.strip()


def say_of(actions: list[ActionStatus]) -> str:
    """One sentence per action still worth telling, oldest first; "" when nothing is."""
    return " ".join(action.say for action in actions if not fully_presented(action))


def build_handoff(
    conversation_id: str, channels: Channels, actions: list[ActionStatus], reasons: dict[str, str]
) -> Handoff:
    return Handoff(
        conversation_id=conversation_id,
        work=work_of(actions),
        channels=channels,
        actions=actions,
        say=say_of(actions),
        channel_reasons=reasons,
    )
