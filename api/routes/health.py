"""`GET /healthz`: ready once Temporal answers and workers poll every task queue (workflows', kinds')."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from settled.api.deps import GatewayHolder
from settled.gateway.gateway import GatewayError
from temporalio.service import RPCError

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(request: Request) -> JSONResponse:
    holder: GatewayHolder = request.app.state.gateways
    try:
        gateway = await holder.get()
        polling = await gateway.worker_polling()
    except GatewayError as error:
        return JSONResponse({"status": "unavailable", "detail": error.message}, status_code=503)
    except RPCError as error:  # Temporal's own words: a namespace gone, credentials refused, ...
        detail = f"Temporal answered {error.status.name}: {error.message}"
        return JSONResponse({"status": "unavailable", "detail": detail}, status_code=503)
    except Exception as error:  # any failure to answer means "not ready"
        return JSONResponse({"status": "unavailable", "detail": type(error).__name__}, status_code=503)
    if not polling:
        return JSONResponse(
            {"status": "unavailable", "detail": "no worker polls a task queue (the workflows' or a kind's)"},
            status_code=503,
        )
    return JSONResponse({"status": "ok"})
