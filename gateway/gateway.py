"""The one place that talks to Temporal on behalf of channels (the API) and operators (the CLI).

Every call is scoped to a tenant (None without API keys). Failures come out as `GatewayError`
carrying the API's error code, so the API and the CLI report them the same way. `Gateway` is the
door; its rooms are beside it: `creating` (a new action), `controls` (authorize, amend, cancel,
reconcile, presented), `conversations` (channel events, the handoff, the stream), `health` (who
polls), over `link` (the client, handles, the guard, an action's status) and `errors`.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from settled.gateway.changes import action_changes, current, wall_clock
from settled.gateway.controls import Controls
from settled.gateway.conversations import Conversations
from settled.gateway.creating import Creating
from settled.gateway.errors import ANSWER_GRACE_S, GatewayError, unless_missing
from settled.gateway.health import Health
from settled.gateway.link import Link
from settled.gateway.reach import (
    keep_api_key_current,
    refused_credentials,
    tls_without_host_check,
    why_unreachable,
)
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from settled.domain.handoff import Handoff
from settled.domain.kinds import Kinds
from settled.domain.models import ActionStatus, ConversationEventBody, CreateAction, PresentedBody
from settled.runtime import tracing
from settled.runtime.config import Settings
from settled.temporal.codec import data_converter

__all__ = ["ANSWER_GRACE_S", "Gateway", "GatewayError", "connect"]


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """A client as Temporal's environment configuration says (settled.runtime.connection); a failure
    is one line naming the cause and the setting that fixes it (settled.gateway.reach)."""
    options = settings.temporal.connect_options()
    options.update(target_host=settings.temporal_address, namespace=settings.namespace)
    if settings.temporal.uses_tls and settings.temporal.disable_host_verification:
        options["tls"] = await tls_without_host_check(settings.temporal)
    try:
        client = await Client.connect(
            **options,
            data_converter=data_converter(settings.encryption_keys),
            runtime=runtime,
            interceptors=tracing.client_interceptors(),
        )
    except (RuntimeError, RPCError) as error:  # the SDK's core reports connection failures this way
        why = await why_unreachable(settings.temporal, error)
        raise GatewayError(
            "temporal_refused" if refused_credentials(error) else "temporal_unavailable", why
        ) from None
    keep_api_key_current(client, settings.temporal)
    return client


class Gateway:
    """`eager`: a worker on this client (the API's own) runs a new action's first task. The rest are
    for tests: `continue_as_new_after` (history events after which the workflows it starts continue as
    new; None: their own limit), `idle_close_after` (how long a conversation stays open with nothing
    new; None: the settings' `conversation_idle_s`), `answer_grace_s` (how long past a caller's wait
    Temporal may take to answer), `clock` (what time it is where the workflows run: a time-skipping
    test server's own)."""

    def __init__(
        self,
        client: Client,
        kinds: Kinds,
        settings: Settings,
        eager: bool = False,
        *,
        continue_as_new_after: int | None = None,
        idle_close_after: timedelta | None = None,
        answer_grace_s: float = ANSWER_GRACE_S,
        clock: Callable[[], Awaitable[datetime]] = wall_clock,
    ) -> None:
        if idle_close_after is None:
            idle_close_after = timedelta(seconds=settings.conversation_idle_s)
        self.link = Link(
            client, kinds, settings, answer_grace_s, continue_as_new_after, idle_close_after, clock
        )
        self.controls = Controls(self.link)
        self.conversations = Conversations(self.link, self.controls)
        self.creating = Creating(self.link, self.conversations, eager)
        self.health = Health(self.link)

    @property
    def client(self) -> Client:
        return self.link.client

    # -- actions -------------------------------------------------------------------------------

    async def create(
        self,
        tenant: str | None,
        body: CreateAction,
        wait_s: float,
        one_conversation: bool = False,
        reports_heard: bool = True,
    ) -> tuple[bool, ActionStatus]:
        """(created, status). Nothing is recorded unless the kind and params are valid; an operation
        id of another conversation is refused (`Creating.create`)."""
        return await self.creating.create(tenant, body, wait_s, one_conversation, reports_heard)

    async def get(self, tenant: str | None, operation_id: str) -> ActionStatus:
        return await self.link.get(tenant, operation_id)

    async def authorize(
        self, tenant: str | None, operation_id: str, by: str | None, wait_s: float
    ) -> ActionStatus:
        return await self.controls.authorize(tenant, operation_id, by, wait_s)

    async def amend(self, tenant: str | None, operation_id: str, params: dict[str, Any]) -> ActionStatus:
        return await self.controls.amend(tenant, operation_id, params)

    async def cancel(
        self, tenant: str | None, operation_id: str, by: str | None, reason: str | None, wait_s: float
    ) -> ActionStatus:
        return await self.controls.cancel(tenant, operation_id, by, reason, wait_s)

    async def reconcile(self, tenant: str | None, operation_id: str, wait_s: float, why: str) -> ActionStatus:
        return await self.controls.reconcile(tenant, operation_id, wait_s, why)

    async def presented(self, tenant: str | None, operation_id: str, body: PresentedBody) -> ActionStatus:
        """Record what a channel presented of the action (what the caller saw or heard)."""
        return await self.controls.presented(tenant, operation_id, body)

    async def current_change(self, tenant: str | None, operation_id: str) -> tuple[int, ActionStatus] | None:
        """An action's current change number and status (None while it has none, or does not exist)."""
        handle = self.link.action(tenant, operation_id)
        described = await unless_missing(self.link.guard(lambda: current(handle)))
        return described[1] if described is not None else None

    def action_changes(
        self, tenant: str | None, operation_id: str, after: int | None
    ) -> AsyncIterator[tuple[int, ActionStatus]]:
        """Each durable change of an action after change number `after`, read from its own history
        (`settled.gateway.changes.action_changes`)."""
        return action_changes(
            self.link.client, self.link.action(tenant, operation_id), after, self.link.clock
        )

    # -- conversations -------------------------------------------------------------------------

    async def conversation_event(
        self, tenant: str | None, conversation_id: str, body: ConversationEventBody
    ) -> list[str]:
        """Record a channel event; the operation ids whose lookups it started (interruptions and
        openings reconcile what may be in flight)."""
        return await self.conversations.event(tenant, conversation_id, body)

    async def handoff(self, tenant: str | None, conversation_id: str) -> Handoff:
        return await self.conversations.handoff(tenant, conversation_id)

    async def conversation_actions(self, tenant: str | None, conversation_id: str) -> list[str]:
        """The operation ids of the conversation's actions, oldest first ([] while it has none)."""
        return await self.conversations.actions(tenant, conversation_id)

    def conversation_changes(
        self, tenant: str | None, conversation_id: str, idle_s: float = 1.0
    ) -> AsyncIterator[None]:
        """Yields once at once, then each time the conversation may have changed."""
        return self.conversations.changes(tenant, conversation_id, idle_s)

    # -- health --------------------------------------------------------------------------------

    async def worker_polling(self) -> bool:
        return await self.health.worker_polling()

    async def pollers(self, queue: str, workflows: bool = False) -> set[str]:
        return await self.health.pollers(queue, workflows)
