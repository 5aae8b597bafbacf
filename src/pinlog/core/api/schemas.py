"""Request and response bodies of the public API (camelCase JSON; unknown fields → 422)."""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pinlog.core.inputs import NonBlank, PlaceIn, StrictIn
from pinlog.core.services import (
    AiStatus,
    PlaceView,
    PublicKeywordsView,
    RecordView,
)


#: The public API's input base (the one shared with the importer, :mod:`pinlog.core.inputs`).
_In = StrictIn


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class TextIn(_In):
    """A context text: not empty/whitespace, at most ``PINLOG_MAX_TEXT_CHARS`` characters."""

    text: NonBlank


class CreateRecordIn(TextIn):
    place: PlaceIn


class CreatedRecordOut(_Out):
    record_id: int
    context_id: int
    public_id: str = Field(description="What other members use to see the record's public view "
                                       "(GET /v1/public/records/{publicId})")


class ContextIdOut(_Out):
    context_id: int


class EditedOut(_Out):
    """The answer of an edit: the context now holding the text, and whether it is new."""

    context_id: int
    changed: bool = Field(description="false when the text was already the context's text (no "
                                      "new context, nothing reprocessed; contextId is the same)")


class PlaceOut(_Out):
    external_place_id: str
    name: str
    address: str | None
    road_address: str | None
    lat: float
    lng: float

    @classmethod
    def of(cls, place: PlaceView) -> PlaceOut:
        return cls.model_validate(place, from_attributes=True)


class ContextOut(_Out):
    context_id: int
    text: str
    ai_status: AiStatus = Field(description="processing | ready (both stages done) | failed")
    keywords: list[str] = Field(description="Display names (owner view, SPEC §8)")


class RecordOut(_Out):
    record_id: int
    public_id: str = Field(description="What other members use to see the record's public view "
                                       "(GET /v1/public/records/{publicId}); never changes")
    place: PlaceOut
    keywords: list[str] = Field(description="Union over the active contexts (owner view)")
    contexts: list[ContextOut]

    @classmethod
    def of(cls, view: RecordView) -> RecordOut:
        return cls(record_id=view.record_id, public_id=view.public_id,
                   place=PlaceOut.of(view.place), keywords=view.keywords,
                   contexts=[ContextOut(context_id=c.context_id, text=c.text,
                                        ai_status=c.ai_status, keywords=c.keywords)
                             for c in view.contexts])


class RecordListOut(_Out):
    """A page of the member's records, newest first (``pinlog records --json`` prints all of
    them in one body: ``total`` = ``len(records)``, ``nextCursor`` null)."""

    records: list[RecordOut]
    total: int = Field(description="The member's active records in all (every page)")
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null on the last page")


class PublicRecordOut(_Out):
    """A record's public view: its place and PUBLIC keywords — no text, no ids but its
    ``publicId``."""

    public_id: str
    place: PlaceOut
    keywords: list[str] = Field(description="PUBLIC keywords only (display names)")

    @classmethod
    def of(cls, view: PublicKeywordsView) -> PublicRecordOut:
        return cls(public_id=view.public_id, place=PlaceOut.of(view.place), keywords=view.keywords)


class MeOut(_Out):
    member_id: int
