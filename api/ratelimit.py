"""Rate limits (`SETTLED_RATE_LIMIT`): a token bucket per tenant, so one runaway client cannot starve the
others. Without API keys, and for a caller whose key is not valid, the bucket is per client address
(which also slows down anyone guessing keys). /healthz and /metrics are exempt: probes and scrapers
must see the truth even while a client is throttled.

Over the limit: 429 `{"error": {"code": "rate_limited", ...}}` with `Retry-After` in whole seconds.
"""

import math
import time
from collections.abc import Callable

from settled.api.access import key_tenant
from settled.api.errors import send_error
from starlette.types import ASGIApp, Receive, Scope, Send

from settled.runtime.config import RateLimit

EXEMPT_PATHS = frozenset({"/healthz", "/metrics"})
# Buckets kept before the full ones are dropped (a full bucket is the same as none).
SWEEP_AT = 10_000


class TokenBuckets:
    """Tokens refill at `limit.per_s` up to `limit.burst`; a request takes one."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when counted)
        self._sweep_at = SWEEP_AT

    def take(self, key: str) -> float:
        """0.0 when a token was taken; otherwise the seconds until one will be there.

        No lock: the event loop runs this without an await in between, so it is atomic."""
        now = self.clock()
        tokens = self._tokens(key, now)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            if len(self._buckets) >= self._sweep_at:
                self._sweep(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1 - tokens) / self.limit.per_s

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self.limit.burst), now))
        return min(float(self.limit.burst), tokens + (now - at) * self.limit.per_s)

    def _sweep(self, now: float) -> None:
        for key in [key for key in self._buckets if self._tokens(key, now) >= self.limit.burst]:
            del self._buckets[key]
        # Many busy callers at once: sweep again only after the table doubled, not on every request.
        self._sweep_at = max(SWEEP_AT, 2 * len(self._buckets))

    def __len__(self) -> int:
        return len(self._buckets)


class RateLimited:
    """ASGI middleware; `api_keys` maps each key to its tenant (empty: no keys, per address)."""

    def __init__(self, app: ASGIApp, limit: RateLimit, api_keys: dict[str, str]) -> None:
        self.app = app
        self.limit = limit
        self.api_keys = api_keys
        self.buckets = TokenBuckets(limit)

    def caller(self, scope: Scope) -> str:
        if self.api_keys:
            headers = dict(scope.get("headers", []))
            scheme, _, presented = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and presented:
                tenant = key_tenant(self.api_keys, presented)
                if tenant is not None:
                    return f"tenant:{tenant}"
        client = scope.get("client")
        return f"address:{client[0] if client else 'unknown'}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        wait_s = self.buckets.take(self.caller(scope))
        if wait_s == 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = max(1, math.ceil(wait_s))
        await self._reject(send, retry_after)

    async def _reject(self, send: Send, retry_after: int) -> None:
        message = (
            f"more than {self.limit.burst} requests at once or {self.limit.per_s:g} a second from this "
            f"caller; retry in {retry_after} s"
        )
        await send_error(send, 429, "rate_limited", message, [(b"retry-after", str(retry_after).encode())])
