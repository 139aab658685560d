"""The action routes (docs/reference.md)."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Response
from pydantic import BeforeValidator
from settled.api.deps import CallerDep, GatewayDep, TenantDep
from settled.api.strict import StrictJsonRoute, valid_path_ids

from settled.domain.models import (
    IDENTIFIER_PATTERN,
    WAIT_MAX_S,
    ActionStatus,
    AmendBody,
    AuthorizeBody,
    CancelBody,
    CreateAction,
    PresentedBody,
)
from settled.runtime.tracing import answered

router = APIRouter(
    prefix="/v1/actions",
    tags=["actions"],
    route_class=StrictJsonRoute,
    dependencies=[Depends(valid_path_ids)],
)

OperationId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="1-128 of A-Z a-z 0-9 . _ : -")]
WaitS = Annotated[
    float,
    Query(ge=0, le=WAIT_MAX_S, allow_inf_nan=False, description="seconds to wait for a verified outcome"),
]


def _true_or_false(value: object) -> object:
    """A boolean query value is written `true` or `false`; `1`, `yes` or `on` is refused."""
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("must be true or false")


ReportsHeard = Annotated[
    bool,
    BeforeValidator(_true_or_false),
    Query(description="false: the caller never reports what was heard (no `presented` follows)"),
]


@router.post("", response_model=ActionStatus, status_code=201, responses={200: {"model": ActionStatus}})
async def create_action(
    body: CreateAction,
    response: Response,
    caller: CallerDep,
    gateway: GatewayDep,
    wait: WaitS = 0,
    reports_heard: ReportsHeard = True,
) -> ActionStatus:
    caller.may_use(body.conversation_id)
    one_conversation = caller.conversation_id is not None
    created, status = await gateway.create(caller.tenant, body, wait, one_conversation, reports_heard)
    if not created:
        response.status_code = 200
    return answered(status)


@router.get("/{operation_id}", response_model=ActionStatus)
async def get_action(operation_id: OperationId, tenant: TenantDep, gateway: GatewayDep) -> ActionStatus:
    return answered(await gateway.get(tenant, operation_id))


@router.post("/{operation_id}/authorize", response_model=ActionStatus)
async def authorize_action(
    operation_id: OperationId,
    tenant: TenantDep,
    gateway: GatewayDep,
    body: Annotated[AuthorizeBody | None, Body()] = None,
    wait: WaitS = 0,
) -> ActionStatus:
    return answered(await gateway.authorize(tenant, operation_id, (body or AuthorizeBody()).by, wait))


@router.post("/{operation_id}/amend", response_model=ActionStatus)
async def amend_action(
    operation_id: OperationId, body: AmendBody, tenant: TenantDep, gateway: GatewayDep
) -> ActionStatus:
    return answered(await gateway.amend(tenant, operation_id, body.params))


@router.post("/{operation_id}/cancel", response_model=ActionStatus)
async def cancel_action(
    operation_id: OperationId,
    tenant: TenantDep,
    gateway: GatewayDep,
    body: Annotated[CancelBody | None, Body()] = None,
    wait: WaitS = 0,
) -> ActionStatus:
    body = body or CancelBody()
    return answered(await gateway.cancel(tenant, operation_id, body.by, body.reason, wait))


@router.post("/{operation_id}/reconcile", response_model=ActionStatus)
async def reconcile_action(
    operation_id: OperationId, tenant: TenantDep, gateway: GatewayDep, wait: WaitS = 0
) -> ActionStatus:
    return answered(await gateway.reconcile(tenant, operation_id, wait, "reconcile requested over the API"))


@router.post("/{operation_id}/presented", response_model=ActionStatus)
async def record_presented(
    operation_id: OperationId, body: PresentedBody, tenant: TenantDep, gateway: GatewayDep
) -> ActionStatus:
    return answered(await gateway.presented(tenant, operation_id, body))
