"""``/v1/records``: create, list, show, add a context, delete, public keywords (SPEC §4, §8)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from pinlog.core.api.deps import Member, Service
from pinlog.core.api.errors import R401, R404, R409_EXISTS, R409_RECORD, R422, CoreRoute
from pinlog.core.api.schemas import (
    ContextIdOut,
    CreatedRecordOut,
    CreateRecordIn,
    PublicKeywordsOut,
    RecordListOut,
    RecordOut,
    TextIn,
)
from pinlog.core.services import MAX_ID

router = APIRouter(prefix="/v1/records", tags=["records"], route_class=CoreRoute,
                   responses={**R401, **R422})

RecordId = Annotated[int, Path(gt=0, le=MAX_ID, description="Record id")]


@router.post("", status_code=201, response_model=CreatedRecordOut, responses=R409_EXISTS)
async def create_record(body: CreateRecordIn, member_id: Member, service: Service) -> CreatedRecordOut:
    """Save a place as a record with its first context. The place is stored by
    ``externalPlaceId`` (first snapshot kept). 409 ``RECORD_EXISTS`` (with ``recordId``) when the
    member already has an active record for that place. AI processing starts after the commit."""
    record_id, context_id = await service.create_record(member_id, body.place.to_input(), body.text)
    return CreatedRecordOut(record_id=record_id, context_id=context_id)


@router.get("", response_model=RecordListOut)
async def list_records(
    member_id: Member, service: Service,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,  # SQL OFFSET is a bigint
) -> RecordListOut:
    """The member's active records, newest first: place, keywords (union over active contexts,
    owner view) and every active context with its text, ``aiStatus`` and keywords. Contexts whose
    AI is unfinished or failed are listed too, just without keywords."""
    views = await service.list_records(member_id, limit=limit, offset=offset)
    return RecordListOut(records=[RecordOut.of(v) for v in views])


@router.get("/{record_id}", response_model=RecordOut, responses=R404)
async def get_record(record_id: RecordId, member_id: Member, service: Service) -> RecordOut:
    """One of the member's active records (404 for another member's record)."""
    return RecordOut.of(await service.get_record(member_id, record_id))


@router.post("/{record_id}/contexts", status_code=201, response_model=ContextIdOut, responses=R404)
async def add_context(record_id: RecordId, body: TextIn, member_id: Member,
                      service: Service) -> ContextIdOut:
    """Add a context to the member's record; AI processing starts after the commit."""
    return ContextIdOut(context_id=await service.add_context(member_id, record_id, body.text))


@router.delete("/{record_id}", status_code=204, responses={**R404, **R409_RECORD})
async def delete_record(
    record_id: RecordId, member_id: Member, service: Service,
    force: Annotated[bool, Query(description="Required when the record has several contexts")] = False,
) -> Response:
    """Delete the record and all its contexts (their AI data is invalidated at once).

    A record with a single context is deleted without ``force``; a record with several contexts
    needs ``force=true`` — otherwise 409 ``RECORD_HAS_CONTEXTS`` says what would be removed
    (``forcedDeleteWouldRemove``: record id, place name, number of contexts)."""
    await service.delete_record(member_id, record_id, force=force)
    return Response(status_code=204)


@router.get("/{record_id}/public-keywords", response_model=PublicKeywordsOut, responses=R404)
async def public_keywords(record_id: RecordId, member_id: Member, service: Service) -> PublicKeywordsOut:
    """What other members may see of any active record: its place and PUBLIC keywords only
    (no texts, no context ids)."""
    return PublicKeywordsOut.of(await service.public_keywords(record_id))
