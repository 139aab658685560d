"""Dependencies: the gateway of the app (connected lazily, so the API starts before Temporal does),
and the tenant of the caller (an API key, or a page link token: api.page.access)."""

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from settled.api.page.access import tenant_or_link

from settled.config import Settings
from settled.gateway import Gateway, connect
from settled.kinds import Kinds


class GatewayHolder:
    def __init__(self, settings: Settings, kinds: Kinds) -> None:
        self.settings = settings
        self.kinds = kinds
        self._gateway: Gateway | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Gateway:
        if self._gateway is None:
            async with self._lock:
                if self._gateway is None:
                    client = await connect(self.settings)
                    self._gateway = Gateway(client, self.kinds, self.settings)
        return self._gateway


async def get_gateway(request: Request) -> Gateway:
    holder: GatewayHolder = request.app.state.gateways
    return await holder.get()


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
TenantDep = Annotated[str | None, Depends(tenant_or_link)]
