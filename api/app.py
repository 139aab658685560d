"""The FastAPI application factory."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from fastapi import FastAPI
from settled.api import errors
from settled.api.cors import CodecCors
from settled.api.deps import GatewayHolder
from settled.api.edges.mcp import door as mcp
from settled.api.edges.platforms import elevenlabs, retell, vapi
from settled.api.edges.platforms.bodies import STREAMED_PATHS
from settled.api.edges.platforms.webhooks import PLATFORM_BODY_BYTES, PLATFORM_PREFIX
from settled.api.fleet import FleetSeries
from settled.api.limits import BodySizeLimit
from settled.api.metrics import ApiMetrics, HostedWorkerCounters, MeasureRequests
from settled.api.metrics import router as metrics_router
from settled.api.page.routes import router as page_router
from settled.api.ratelimit import RateLimited
from settled.api.routes import actions, codec, conversations, health
from settled.api.routes.kinds import router as kinds_router

from settled.business.startup import prepare
from settled.domain.kinds import Kinds, load_kinds
from settled.runtime import tracing
from settled.runtime.config import Settings
from settled.temporal.codec import EncryptionCodec


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with mcp.serving(app):
        yield
    await app.state.gateways.close()


def create_app(settings: Settings | None = None, kinds: Kinds | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    kinds = kinds or load_kinds(settings.config_path, settings.sandbox_url)
    # The API offers every kind (code kinds' traits need their handlers); its own worker sends requests.
    kinds, handlers = prepare(kinds, sends=settings.api_worker)
    app = FastAPI(
        title="settled",
        version=version("settled"),
        description="Durable, verified state for the consequential actions of voice and chat assistants.",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.metrics = ApiMetrics()
    app.state.worker_counters = HostedWorkerCounters(app.state.metrics.registry)
    app.state.fleet = FleetSeries(
        app.state.metrics.registry, kinds, settings.api_keys.values(), settings.namespace
    )
    app.state.gateways = GatewayHolder(settings, kinds, app.state.worker_counters, handlers)
    errors.install(app)
    app.include_router(health.router)
    app.include_router(actions.router)
    app.include_router(conversations.router)
    app.include_router(kinds_router)
    app.include_router(vapi.router)
    app.include_router(retell.router)
    app.include_router(elevenlabs.router)
    app.include_router(page_router)
    app.include_router(codec.router)
    app.include_router(metrics_router)
    mcp.mount(app)
    if settings.rate_limit is not None:
        # Inside the measurement, so throttled requests show in the metrics and the request log.
        app.add_middleware(RateLimited, limit=settings.rate_limit, api_keys=settings.api_keys)
    app.add_middleware(MeasureRequests, metrics=app.state.metrics)
    if settings.encryption_keys:
        app.state.codec = EncryptionCodec(settings.encryption_keys)
    if settings.codec_cors_origins:
        # Only the codec is cross-origin (the Temporal UI calls it from the browser); /v1 stays closed.
        app.add_middleware(CodecCors, origins=settings.codec_cors_origins)
    platforms = {PLATFORM_PREFIX: max(PLATFORM_BODY_BYTES, settings.max_body_bytes)}
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_body_bytes, larger=platforms, streamed=STREAMED_PATHS
    )
    tracing.start("settled-api")
    tracing.instrument_api(app)  # outermost: each route's span holds all of it
    return app
