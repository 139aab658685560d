"""The part every framework's call tests share: the caller's refund, and what is checked of what the
caller heard, in one place, so the three frameworks are held to the same rule."""

from dataclasses import dataclass, field
from typing import Any

from settled.adapters.common import ActionKind, derived_operation_id

from settled.domain.models import ActionStatus
from settled.domain.states import State
from tests.adapters.conftest import SentClient
from tests.client.support import new_id, refund

# What an adapter sent, in order: channel events as (type, reason), presentations as ("presented",
# "heard" | "cut") (SentClient.sent).
Sent = list[tuple[str, str | None]]


@dataclass(frozen=True)
class Caller:
    """One caller asking an adapter for a refund, and how the call is set up: the adapter's wait for
    the business answer, the audio's chunks (None: one frame per line) and the model's holding line.
    Each framework's `call(caller, ...)` builds its own session from it."""

    settled: SentClient
    kind: ActionKind
    wait_s: float = 5
    chunk_ms: int | None = 20
    holding: str | None = None
    conversation: str = field(default_factory=lambda: new_id("conv"))
    params: dict[str, Any] = field(default_factory=refund)
    # The same refund as the model writes it when the caller says "try again" (None: as at first).
    again: dict[str, Any] | None = None

    @property
    def op(self) -> str:
        """The operation id the adapter derives for this refund."""
        return derived_operation_id(self.conversation, "refund", self.params)

    @property
    def asks(self) -> str:
        return f"Please refund order {self.params['order_id']}."


def written_otherwise(settled: SentClient, kind: ActionKind) -> Caller:
    """A caller whose refund of 5 the model asks again for as 5.0, its keys in another order."""
    params = {**refund(), "amount": 5}
    again = dict(reversed({**params, "amount": 5.0}.items()))
    return Caller(settled, kind, params=params, again=again)


async def met_once(caller: Caller, truth: Any) -> None:
    """Asked twice, written two ways: one action, one refund at the service."""
    assert len(await truth.refunds_for(caller.params["order_id"])) == 1
    action = await caller.settled.get(caller.op)
    assert action.state is State.CONFIRMED and action.attempts == 1


# What an adapter sends for a call that hung up while the confirmation was playing.
CUT_BY_THE_HANG_UP: Sent = [("channel_opened", None), ("presented", "cut"), ("channel_closed", "hangup")]
# ... and one whose confirmation a barge-in cut, its words known only after the barge-in.
CUT_AFTER_A_BARGE_IN: Sent = [
    ("channel_opened", None),
    ("interrupted", None),
    ("presented", "cut"),
    ("channel_closed", "hangup"),
]


async def owed(caller: Caller, verbatim: bool = True, sent: Sent | None = None) -> ActionStatus:
    """The refund confirmed, its sentence cut: recorded as not completed, and owed to the next channel.
    `verbatim`: the presented text is the `say` itself (LiveKit presents the model's own words);
    `sent`: what the adapter sent, in order (None: unchecked)."""
    settled = caller.settled
    action = await settled.get(caller.op)
    assert action.state is State.CONFIRMED
    assert action.presented is not None and action.presented.completed is False
    assert action.presented.for_state is State.CONFIRMED
    assert action.business_ref is not None and action.business_ref in action.presented.text
    assert action.presented.text == action.say or not verbatim
    handoff = await settled.handoff(caller.conversation)
    assert handoff.work == "stopped" and handoff.say == action.say
    assert sent is None or settled.sent == sent
    return action


async def not_heard(caller: Caller) -> None:
    """The refund confirmed and its sentence not known to be heard to its end: not presented (its
    words never reached the adapter before the call ended) or presented as not completed, and owed."""
    action = await caller.settled.get(caller.op)
    assert action.state is State.CONFIRMED
    assert action.presented is None or action.presented.completed is False
    assert (await caller.settled.handoff(caller.conversation)).say == action.say


# What an adapter sends for a call whose confirmation was heard to its end before the caller hung up.
HEARD_THEN_HUNG_UP: Sent = [("channel_opened", None), ("presented", "heard"), ("channel_closed", "hangup")]
# The same, after a barge-in that cut only what came before the confirmation.
HEARD_AFTER_A_BARGE_IN: Sent = [
    ("channel_opened", None),
    ("interrupted", None),
    ("presented", "heard"),
    ("channel_closed", "hangup"),
]


async def heard_in_full(
    caller: Caller,
    said_last: str | None = None,
    sent: Sent | None = HEARD_THEN_HUNG_UP,
) -> None:
    """The confirmation played to its end: recorded as heard, never repeated. `said_last`: the model's
    last line, which must be that sentence; `sent`: what the adapter sent, in order (None: unchecked)."""
    settled = caller.settled
    action = await settled.get(caller.op)
    assert action.presented is not None and action.presented.completed
    assert action.presented.text == action.say
    assert said_last is None or said_last == action.say
    assert (await settled.handoff(caller.conversation)).say == ""
    assert sent is None or settled.sent == sent


async def recorded_heard(caller: Caller) -> bool:
    action = await caller.settled.get(caller.op)
    return action.presented is not None and action.presented.completed


async def sent(settled: SentClient, what: tuple[str, str | None]) -> bool:
    return what in settled.sent
