"""`GET /v1/kinds`: what a channel adapter needs to offer the kinds as tools, without a copy of the
kinds file. Never the business system's addresses: those are the worker's business, not a channel's."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from settled.api.deps import TenantDep

from settled.domain.kinds import Kinds
from settled.domain.models import KindInfo, KindList

router = APIRouter(prefix="/v1/kinds", tags=["kinds"])


def configured_kinds(request: Request) -> Kinds:
    kinds: Kinds = request.app.state.gateways.kinds
    return kinds


@router.get("", response_model=KindList)
async def list_kinds(_: TenantDep, kinds: Annotated[Kinds, Depends(configured_kinds)]) -> KindList:
    return KindList(
        kinds=[
            KindInfo(
                name=spec.name,
                description=spec.description,
                requires_authorization=spec.requires_authorization,
                compensable=spec.compensable,
                params_schema=spec.params_schema,
            )
            for spec in sorted(kinds, key=lambda spec: spec.name)
        ]
    )
