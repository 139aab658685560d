"""The /_sandbox control plane: ground truth, the request log, reset, fault injection, and how
transfers finish."""

from typing import Any

from fastapi import APIRouter, Request
from settled.sandbox.db import now
from settled.sandbox.errors import ApiError
from settled.sandbox.faults import FaultSpec
from settled.sandbox.services import TRANSFERS, Op, ServiceName
from settled.sandbox.settling import FinishSpec, TransferSettings
from settled.sandbox.state import sandbox_of

router = APIRouter(prefix="/_sandbox", tags=["sandbox"])

# Handlers are async on purpose: sync ones would run in a thread pool, away from the event loop
# that the fault gates (asyncio events) belong to.


@router.get("/records")
async def records(
    request: Request, service: ServiceName | None = None, key: str | None = None
) -> dict[str, Any]:
    rows, at = sandbox_of(request).store.records(service, key), now()
    return {"records": [record.ground_truth(at) for record in rows]}


@router.get("/requests")
async def requests(
    request: Request, service: ServiceName | None = None, op: Op | None = None, key: str | None = None
) -> dict[str, Any]:
    return {"requests": sandbox_of(request).log.rows(service, op, key)}


@router.post("/reset")
async def reset(request: Request) -> dict[str, Any]:
    sandbox_of(request).reset()
    return {"reset": True}


@router.post("/faults", status_code=201)
async def add_fault(spec: FaultSpec, request: Request) -> dict[str, Any]:
    return sandbox_of(request).faults.add(spec).as_json()


@router.get("/faults")
async def list_faults(request: Request) -> dict[str, Any]:
    return {"faults": [fault.as_json() for fault in sandbox_of(request).faults.active()]}


@router.delete("/faults")
async def clear_faults(request: Request) -> dict[str, Any]:
    cleared, released = sandbox_of(request).faults.clear()
    return {"cleared": cleared, "released": released}


@router.post("/faults/release-all")
async def release_all(request: Request) -> dict[str, Any]:
    return {"released": sandbox_of(request).faults.release_all()}


@router.post("/faults/{fault_id}/release")
async def release(fault_id: str, request: Request) -> dict[str, Any]:
    faults = sandbox_of(request).faults
    fault = faults.get(fault_id)
    if fault is None:
        raise ApiError(404, "not_found", f"no fault {fault_id!r}")
    return {"id": fault.id, "released": faults.release(fault)}


@router.get("/transfers")
async def transfer_settings(request: Request) -> dict[str, Any]:
    return sandbox_of(request).transfers.model_dump()


@router.put("/transfers")
async def set_transfer_settings(settings: TransferSettings, request: Request) -> dict[str, Any]:
    """Replace how transfers committed from now on finish (fields left out take their defaults)."""
    sandbox_of(request).transfers = settings
    return settings.model_dump()


@router.post("/transfers/{transfer_id}/finish")
async def finish_transfer(
    transfer_id: str, request: Request, spec: FinishSpec | None = None
) -> dict[str, Any]:
    """End a pending transfer now: as decided when it committed, or with the outcome given."""
    sandbox = sandbox_of(request)
    finish = spec or FinishSpec()
    record, finished = sandbox.store.finish(
        TRANSFERS.name, transfer_id, lambda decided: finish.reason(decided, sandbox.transfers)
    )
    if record is None:
        raise ApiError(404, "not_found", f"no transfer {transfer_id!r}")
    if not finished:
        raise ApiError(409, "already_finished", f"transfer {transfer_id!r} is {record.status_at()}")
    return record.view(TRANSFERS)
