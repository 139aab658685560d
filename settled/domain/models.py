"""The wire models: what channels send and what they get back (docs/reference.md)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints

from settled.domain.states import Claim, State

IDENTIFIER_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
Channel = Literal["voice", "text"]
WAIT_MAX_S = 30.0
# What a redacted param value reads (retention rules).
REDACTED_MARK = "[redacted]"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HistoryEntry(BaseModel):
    state: State
    at: datetime
    note: str


class LogEntry(BaseModel):
    """Something that happened without a change of state: a control, a business answer."""

    at: datetime
    event: str
    note: str


class Presented(BaseModel):
    channel: Channel
    text: str
    completed: bool
    state: State  # the action's state when the presentation was recorded
    at: datetime
    # Beyond the contract: the state whose sentence the channel presented, when it says so. A sentence
    # about `unknown` finished after the action turned `confirmed` did not present the confirmation.
    for_state: State | None = None


class ActionStatus(BaseModel):
    operation_id: str
    conversation_id: str
    kind: str
    params: dict[str, Any]
    state: State
    authorized: bool
    dispatched: bool
    attempts: int
    business_ref: str | None
    reason: str | None
    cancel_requested: bool
    compensated: bool
    needs_attention: bool
    claim: Claim
    say: str
    presented: Presented | None
    history: list[HistoryEntry]
    updated_at: datetime
    # Beyond the contract: controls and business answers, newest last (bounded).
    log: list[LogEntry] = Field(default_factory=list)
    # Beyond the contract: a reversal (compensation) is under way; the state stays `confirmed` until it
    # is answered, so a channel should keep watching rather than announce "done".
    compensating: bool = False


class TakenSend(BaseModel):
    """What an action whose send waits in its kind's queue becomes once the kind's worker takes the
    send: Temporal records that durably before anything leaves, and reads show this from then until
    the send's answer is recorded."""

    state: State
    claim: Claim
    say: str
    note: str

    def applied(self, status: ActionStatus, at: datetime) -> ActionStatus:
        """`status` once the send was taken at `at`: it may be reaching the service now."""
        entry = HistoryEntry(state=self.state, at=at, note=self.note)
        return status.model_copy(
            update={
                "state": self.state,
                "dispatched": True,
                "claim": self.claim,
                "say": self.say,
                "history": [*status.history, entry],
                "updated_at": max(at, status.updated_at),
            }
        )


def is_redacted(status: ActionStatus) -> bool:
    """Whether retention has redacted the action's params."""
    return REDACTED_MARK in status.params.values()


def redacted_like(earlier: ActionStatus, redacted: ActionStatus) -> ActionStatus:
    """An earlier snapshot of an action whose params were redacted since, without them and without
    the sentences that may quote them: what was said, and what a channel presented."""
    presented = earlier.presented
    return earlier.model_copy(
        update={
            "params": dict(redacted.params),
            "say": redacted.say if earlier.state is redacted.state else REDACTED_MARK,
            "presented": presented.model_copy(update={"text": REDACTED_MARK}) if presented else None,
        }
    )


# Request bodies -----------------------------------------------------------------------------


class CreateAction(_Body):
    conversation_id: Identifier
    kind: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    params: dict[str, Any] = Field(default_factory=dict)
    operation_id: Identifier | None = None
    # Strict: "yes" or "1" must not count as the caller's go-ahead.
    authorized: StrictBool = False
    authorized_by: Annotated[str, StringConstraints(max_length=200)] | None = None


class AuthorizeBody(_Body):
    by: Annotated[str, StringConstraints(max_length=200)] | None = None


class AmendBody(_Body):
    params: dict[str, Any]


class CancelBody(_Body):
    by: Annotated[str, StringConstraints(max_length=200)] | None = None
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class PresentedBody(_Body):
    channel: Channel
    text: Annotated[str, StringConstraints(max_length=4000)]
    completed: StrictBool
    # Optional: the `state` of the status the text came from. Without it, the text is compared with `say`.
    for_state: State | None = None


class ConversationEventBody(_Body):
    type: Literal["channel_opened", "channel_closed", "interrupted"]
    channel: Channel
    reason: Annotated[str, StringConstraints(max_length=200)] | None = None


# The kinds, as channels see them -------------------------------------------------------------


class KindInfo(BaseModel):
    """What a channel needs to offer a kind as a tool: never where the business system is."""

    name: str
    description: str
    requires_authorization: bool
    compensable: bool
    params_schema: dict[str, Any]


class KindList(BaseModel):
    kinds: list[KindInfo]
