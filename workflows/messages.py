"""Inputs and results of the workflows' updates, signals and queries. Pure pydantic models."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from settled.domain.machine import ActionRecord, NewAction
from settled.domain.models import WAIT_MAX_S, ActionStatus, Channel
from settled.domain.states import State

Wait = Field(default=0.0, ge=0, le=WAIT_MAX_S)
# The memo key under which an action keeps its latest durable status: what GET reads, from the server
# alone, without a query to a worker.
STATUS_MEMO = "settled_status"
# The memo key under which an action keeps the number of its latest change (`ActionRecord.version`,
# carried over continue-as-new): where a stream that follows the action's history stands.
VERSION_MEMO = "settled_version"
# The memo key under which an action whose send waits in its kind's queue keeps what it becomes once
# the kind's worker takes the send (`TakenSend`); removed once the send is answered or taken back.
TAKEN_MEMO = "settled_once_taken"
# The workflow code a run was started by: its start carries the revision, and a run keeps the
# behaviour of the revision it started at, so histories recorded earlier replay exactly as recorded.
# Runs recorded before revisions existed carry 1 and ask `workflow.patched` at every patch.
#
# Runs take every path their patches guard without asking: a new run would be told "patched" anyway,
# and asking records a marker and a TemporalChangeVersion search-attribute write per patch.
PATCHED_REVISION = 2
# Actions no longer signal their conversation on every change: the handoff, the events route and the
# stream read the actions' own memo and history.
QUIET_REVISION = 3
# Conversations are started by a new action with a start delay as long as their idle period: the
# action's id is recorded durably with the start, and no workflow task runs until something needs one
# (another action, a channel event) or the delay runs out, when the run knows it has been idle since.
LAZY_REVISION = 4
# Actions follow the rules for real services: a compensation whose answer was lost is looked up, not
# re-sent blindly, and one is sent only once every dispatch whose answer was lost is past its commit
# horizon; a send refused because its kind has no more room waits as `requested` (queued) until its
# kind's worker takes it and records that it is sending (the `sending` update).
SERVICES_REVISION = 5
# A queued send's turn is taken without that update: Temporal's own record that the kind's worker took
# the send (the activity started) marks it sending, and reads show it so from then (`TAKEN_MEMO`); a
# cancel or an amend while it waits takes the send back, which Temporal refuses once a worker has taken
# it. The overflow path costs one workflow task more than the direct one, not two.
QUEUE_REVISION = 6
# An action's Actions on Temporal Cloud cut where no rule needs them: a change that leaves the close
# deadline where it was (a `presented`) starts no new timer, and the state search attribute is written
# only for states an operator acts on. A send whose answer is lost is looked up in the same business call,
# right away, and both answers are recorded in one workflow task (no backoff timer, no second call, no
# `unknown` written for operators when the lookup settles it).
LEAN_REVISION = 7
# A settled action closes once nothing more is pending instead of staying open for its whole window of
# late controls; a late control within that window opens it again from the record its last run closed
# with.
CLOSING_REVISION = 8
# What new runs start at.
CURRENT_REVISION = CLOSING_REVISION
Revision = Field(default=1, ge=1)


class ActionStart(BaseModel):
    new: NewAction
    # Set when the workflow continues as new: the record so far; or when a late control opens a closed
    # action again: the record its last run closed with.
    carried: ActionRecord | None = None
    # Set when a late control opens a closed action again: the id of the run it was opened from (runs
    # of one workflow id are otherwise linked only by continue-as-new).
    reopens: str | None = None
    # Set when the creating call started the run with a plain start (which Temporal can run eagerly,
    # in the API's own worker) instead of update-with-start: the run registers that call as it starts,
    # and the call waits this long for the outcome (what the `register` update does otherwise).
    creating_wait_s: float | None = Field(default=None, ge=0, le=WAIT_MAX_S)
    revision: int = Revision
    # History events after which a run continues as new; None: the workflow's own limit (tests lower it).
    continue_as_new_after: int | None = Field(default=None, ge=1)


class Register(BaseModel):
    kind: str
    params: dict[str, Any]
    # The conversation the repeat comes from; None from a gateway of a release that did not send it.
    conversation_id: str | None = None
    wait_s: float = Wait


class Registered(BaseModel):
    created: bool
    status: ActionStatus


class Authorize(BaseModel):
    by: str | None = None
    wait_s: float = Wait


class Amend(BaseModel):
    params: dict[str, Any]


class Cancel(BaseModel):
    by: str | None = None
    reason: str | None = None
    wait_s: float = Wait


class Reconcile(BaseModel):
    why: str = "reconcile requested"
    wait_s: float = Wait


class Present(BaseModel):
    channel: Channel
    text: str
    completed: bool
    for_state: State | None = None


class ActionChanged(BaseModel):
    """Snapshots of one action, one per change, oldest first: what the conversation streams."""

    statuses: list[ActionStatus]


class ConversationStart(BaseModel):
    tenant: str | None
    conversation_id: str
    carried: "ConversationState | None" = None
    revision: int = Revision
    # History events after which a run continues as new; None: the workflow's own limit (tests lower it).
    continue_as_new_after: int | None = Field(default=None, ge=1)
    # Idle time after which it closes (the API's `SETTLED_CONVERSATION_IDLE_S`, always given since that
    # setting); None, in runs started before it: the workflow's own 30 days.
    idle_close_after_s: float | None = Field(default=None, gt=0)


class StreamEvent(BaseModel):
    seq: int
    status: ActionStatus


class ChannelRecord(BaseModel):
    state: str = "unused"
    reason: str | None = None

    def apply(self, event: "ChannelEvent") -> None:
        """What an event of this channel does to it: the conversation's own rule, which the gateway
        also folds over a conversation's history to read it without a query."""
        if event.type == "channel_opened":
            self.state, self.reason = "open", None
        elif event.type == "channel_closed":
            self.state, self.reason = "closed", event.reason or "closed"
        elif self.state == "unused":
            self.state = "open"  # an interruption proves the channel was in use


class ConversationState(BaseModel):
    """Everything a conversation keeps, carried over when it continues as new."""

    operation_ids: list[str] = Field(default_factory=list)  # oldest first
    latest: dict[str, ActionStatus] = Field(default_factory=dict)
    events: list[StreamEvent] = Field(default_factory=list)  # bounded, oldest first
    seq: int = 0
    channels: dict[str, ChannelRecord] = Field(
        default_factory=lambda: {"voice": ChannelRecord(), "text": ChannelRecord()}
    )
    # The last signal or update: the idle clock, which continuing as new does not restart.
    last_activity_at: datetime | None = None


class ChannelEvent(BaseModel):
    type: str
    channel: Channel
    reason: str | None = None


class ChannelEventResult(BaseModel):
    # Operation ids to look up now, among the actions that report their changes to the conversation
    # (started before QUIET_REVISION); the others are judged by their own record, from `tracked`.
    reconcile: list[str]
    tracked: list[str] = Field(default_factory=list)  # every action of the conversation, oldest first


class ConversationView(BaseModel):
    conversation_id: str
    operation_ids: list[str]
    channels: dict[str, ChannelRecord]
    seq: int


class EventsSince(BaseModel):
    seq: int
    events: list[StreamEvent]
    # True when events after `since` were already dropped from the bounded log.
    truncated: bool


ConversationStart.model_rebuild()
