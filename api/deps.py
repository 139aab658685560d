"""Dependencies: the gateway of the app (connected lazily, so the API starts before Temporal does),
and the tenant of the caller."""

import asyncio
import hmac
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

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


def get_tenant(request: Request, authorization: Annotated[str | None, Header()] = None) -> str | None:
    """None without API keys; otherwise the tenant whose key is presented (401 if none matches)."""
    keys: dict[str, str] = request.app.state.settings.api_keys
    if not keys:
        return None
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not presented:
        raise HTTPException(401, "an Authorization: Bearer <key> header is required")
    tenant = None
    for key, owner in keys.items():  # compare against every key, in constant time each
        if hmac.compare_digest(key.encode(), presented.encode()):
            tenant = owner
    if tenant is None:
        raise HTTPException(401, "the API key is not valid")
    return tenant


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
TenantDep = Annotated[str | None, Depends(get_tenant)]
