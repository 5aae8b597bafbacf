"""``/v1/contexts/{id}``: edit (a new context) and delete (SPEC §4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from pinlog.core.api.deps import Member, Service
from pinlog.core.api.errors import R401, R404, R409_LAST, R422, CoreRoute
from pinlog.core.api.schemas import EditedOut, TextIn
from pinlog.core.services import MAX_ID

router = APIRouter(prefix="/v1/contexts", tags=["contexts"], route_class=CoreRoute,
                   responses={**R401, **R404, **R422})

ContextId = Annotated[int, Path(gt=0, le=MAX_ID, description="Context id")]


@router.put("/{context_id}", response_model=EditedOut)
async def edit_context(context_id: ContextId, body: TextIn, member_id: Member,
                       service: Service) -> EditedOut:
    """Edit a context. Contexts are immutable: the edit creates a **new** context (returned
    ``contextId``, ``changed`` true) and cancels the old one with its AI data; nothing is
    inherited. The context's own text again is no edit: ``changed`` false, the same
    ``contextId``, nothing reprocessed."""
    edited = await service.edit(member_id, context_id, body.text)
    return EditedOut(context_id=edited.context_id, changed=edited.changed)


@router.delete("/{context_id}", status_code=204, responses=R409_LAST)
async def delete_context(context_id: ContextId, member_id: Member, service: Service) -> Response:
    """Delete a context and invalidate its AI data. The record's last context cannot be deleted:
    409 ``LAST_CONTEXT`` with what a forced record delete would remove."""
    await service.delete_context(member_id, context_id)
    return Response(status_code=204)
