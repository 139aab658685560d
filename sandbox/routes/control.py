"""The /_sandbox control plane: ground truth, the request log, reset, and fault injection."""

from typing import Any

from fastapi import APIRouter, Request
from settled.sandbox.errors import ApiError
from settled.sandbox.faults import FaultSpec
from settled.sandbox.services import Op, ServiceName
from settled.sandbox.state import sandbox_of

router = APIRouter(prefix="/_sandbox", tags=["sandbox"])

# Handlers are async on purpose: sync ones would run in a thread pool, away from the event loop
# that the fault gates (asyncio events) belong to.


@router.get("/records")
async def records(
    request: Request, service: ServiceName | None = None, key: str | None = None
) -> dict[str, Any]:
    rows = sandbox_of(request).store.records(service, key)
    return {"records": [record.ground_truth() for record in rows]}


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
