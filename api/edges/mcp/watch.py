"""An action's durable changes from now on, by the stream's own means (a long poll of the action's
history: nothing is asked of a worker, and an idle watch costs nothing): what a tool call waits on
while it reports progress, and what a resource subscription tells of."""

from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi import FastAPI
from settled.gateway.gateway import Gateway

from settled.domain.models import ActionStatus


class Watch:
    """Started with `await Watch.start(...)`: every change recorded after that moment is in `changes()`."""

    def __init__(
        self, gateway: Gateway, tenant: str | None, operation_id: str, now: tuple[int, ActionStatus] | None
    ) -> None:
        # The status at the start (None before the action's first change is recorded).
        self.now = now[1] if now is not None else None
        self._after = now[0] if now is not None else 0
        self._gateway = gateway
        self._tenant = tenant
        self._operation_id = operation_id

    @classmethod
    async def start(cls, app: FastAPI, tenant: str | None, operation_id: str) -> "Watch":
        gateway: Gateway = await app.state.gateways.get()
        return cls(gateway, tenant, operation_id, await gateway.current_change(tenant, operation_id))

    async def changes(self) -> AsyncIterator[ActionStatus]:
        """Each change after the start, oldest first (use with `contextlib.aclosing`)."""
        async with aclosing(
            self._gateway.action_changes(self._tenant, self._operation_id, self._after)
        ) as changes:
            async for _, status in changes:
                yield status
