"""``/v1/records``: create, list (cursor pages with a total), show, add a context, delete
(SPEC §4); ``/v1/public/records/{publicId}``: a record's public view (SPEC §8, issue 27 #7).

Cursors (``nextCursor``) are opaque: base64url of the last record id of the page (the member
filter applies to every page, so a cursor can only page the caller's own records)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from pinlog.core.api.deps import Member, Service
from pinlog.core.api.errors import R401, R404, R409_EXISTS, R409_RECORD, R422, CoreRoute, _example
from pinlog.core.api.schemas import (
    ContextIdOut,
    CreatedRecordOut,
    CreateRecordIn,
    PublicRecordOut,
    RecordListOut,
    RecordOut,
    TextIn,
)
from pinlog.core.public_ids import PUBLIC_ID_CHARS
from pinlog.core.services import MAX_ID, InvalidInput
from pinlog.http import ApiError

router = APIRouter(prefix="/v1/records", tags=["records"], route_class=CoreRoute,
                   responses={**R401, **R422})

RecordId = Annotated[int, Path(gt=0, le=MAX_ID, description="Record id")]


@router.post("", status_code=201, response_model=CreatedRecordOut, responses=R409_EXISTS)
async def create_record(body: CreateRecordIn, member_id: Member, service: Service) -> CreatedRecordOut:
    """Save a place as a record with its first context. The place is stored by
    ``externalPlaceId`` (first snapshot kept). 409 ``RECORD_EXISTS`` (with ``recordId``) when the
    member already has an active record for that place. AI processing starts after the commit."""
    record_id, context_id = await service.create_record(member_id, body.place.to_input(), body.text)
    return CreatedRecordOut(record_id=record_id, context_id=context_id,
                            public_id=service.public_id(record_id))


def encode_cursor(before: int) -> str:
    """The opaque cursor of the page that starts below record id ``before``."""
    return base64.urlsafe_b64encode(f"r{before}".encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The record id a cursor of :func:`encode_cursor` names.

    Raises:
        InvalidInput: not such a cursor (422, field ``cursor``).
    """
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    digits = text[1:]
    if not text.startswith("r") or not digits.isdigit() or len(digits) > 19 \
            or not 0 < int(digits) <= MAX_ID:
        raise InvalidInput("cursor", "is not a cursor of this listing (use nextCursor as given)")
    return int(digits)


@router.get("", response_model=RecordListOut)
async def list_records(
    member_id: Member, service: Service,
    limit: Annotated[int, Query(ge=1, le=500, description="Records per page")] = 100,
    cursor: Annotated[str | None, Query(max_length=64, description=(
        "nextCursor of the previous page; omit for the first page"))] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000, deprecated=True, description=(
        "Records to skip (older paging; prefer cursor, which never skips or repeats a record "
        "when records are added or deleted meanwhile)"))] = 0,  # SQL OFFSET is a bigint
) -> RecordListOut:
    """One page of the member's active records, newest first: place, keywords (union over
    active contexts, owner view), ``publicId`` and every active context with its text,
    ``aiStatus`` and keywords. Contexts whose AI is unfinished or failed are listed too, just
    without keywords. ``total`` counts all the member's records; ``nextCursor`` (null on the
    last page) fetches the next page: ``GET /v1/records?cursor=…``."""
    before = decode_cursor(cursor) if cursor is not None else None
    page = await service.record_page(member_id, limit=limit, offset=offset, before=before)
    return RecordListOut(records=[RecordOut.of(v) for v in page.records], total=page.total,
                         next_cursor=encode_cursor(page.next_before)
                         if page.next_before is not None else None)


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


#: The answer of the view that was keyed by record id (issue 27 #7): gone for every caller.
PUBLIC_KEYWORDS_GONE = ("this view moved to GET /v1/public/records/{publicId}: record ids "
                        "could be counted through; a record's publicId is in GET /v1/records "
                        "(its owner shares it)")


@router.get("/{record_id}/public-keywords", status_code=410, deprecated=True,
            responses={410: _example("GONE", PUBLIC_KEYWORDS_GONE)})
async def public_keywords_gone(record_id: RecordId) -> Response:
    """Gone: the public view is ``GET /v1/public/records/{publicId}`` (410 for any id, any
    caller, so it reveals nothing)."""
    raise ApiError(410, "GONE", PUBLIC_KEYWORDS_GONE)


public_router = APIRouter(prefix="/v1/public/records", tags=["records"], route_class=CoreRoute,
                          responses={**R401, **R404, **R422})


@public_router.get("/{public_id}", response_model=PublicRecordOut)
async def public_record(
    public_id: Annotated[str, Path(min_length=1, max_length=PUBLIC_ID_CHARS + 16,
                                   description="A record's publicId (from its owner)")],
    member_id: Member, service: Service,
) -> PublicRecordOut:
    """What any member may see of an active record, by its ``publicId``: the place and PUBLIC
    keywords only (no texts, no record or context ids). A public id cannot be derived from a
    record id, so the records of others cannot be listed by counting; an unknown, forged or
    deleted record's id answers 404."""
    return PublicRecordOut.of(await service.public_record(public_id))
