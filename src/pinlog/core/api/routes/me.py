"""``/v1/me``: the current member; withdrawal (SPEC §4)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from pinlog.core.api.deps import Member, Service
from pinlog.core.api.errors import R401, CoreRoute
from pinlog.core.api.schemas import MeOut

router = APIRouter(prefix="/v1/me", tags=["me"], route_class=CoreRoute, responses=R401)


@router.get("", response_model=MeOut)
async def me(member_id: Member) -> MeOut:
    """The member the token belongs to."""
    return MeOut(member_id=member_id)


@router.delete("", status_code=204)
async def withdraw(member_id: Member, service: Service) -> Response:
    """Withdraw: the member, all records and contexts are deleted and all AI data invalidated,
    in one transaction. The token stops working (401)."""
    await service.withdraw_member(member_id)
    return Response(status_code=204)
