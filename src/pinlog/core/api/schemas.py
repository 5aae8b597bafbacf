"""Request and response bodies of the public API (camelCase JSON; unknown fields → 422)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pinlog.core.services import (
    MAX_ADDRESS_CHARS,
    MAX_PLACE_ID_CHARS,
    MAX_PLACE_NAME_CHARS,
    AiStatus,
    PlaceInput,
    PlaceView,
    PublicKeywordsView,
    RecordView,
)
from pinlog.text import is_blank


class _In(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", strict=True)


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


def _not_blank(value: str) -> str:
    """422 for a value that is blank once normalised (whitespace or invisible characters only,
    e.g. ``\u3164``, ``\u200b``, ``\ufeff``: :func:`pinlog.text.is_blank`)."""
    if is_blank(value):
        raise ValueError("must not be empty or whitespace")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: A string of the public API that must say something: blank once normalised or with NUL → 422
#: (:func:`_not_blank`); the field adds its length limits.
NonBlank = Annotated[str, AfterValidator(_not_blank)]


class PlaceIn(_In):
    """A place (snapshot stored on first save). ``lat``/``lng`` in degrees."""

    external_place_id: NonBlank = Field(min_length=1, max_length=MAX_PLACE_ID_CHARS)
    name: NonBlank = Field(min_length=1, max_length=MAX_PLACE_NAME_CHARS)
    address: str | None = Field(None, max_length=MAX_ADDRESS_CHARS)
    road_address: str | None = Field(None, max_length=MAX_ADDRESS_CHARS)
    lat: float = Field(ge=-90, le=90, allow_inf_nan=False)
    lng: float = Field(ge=-180, le=180, allow_inf_nan=False)

    def to_input(self) -> PlaceInput:
        return PlaceInput(external_place_id=self.external_place_id, name=self.name,
                          lat=self.lat, lng=self.lng, address=self.address,
                          road_address=self.road_address)


class TextIn(_In):
    """A context text: not empty/whitespace, at most ``PINLOG_MAX_TEXT_CHARS`` characters."""

    text: NonBlank


class CreateRecordIn(TextIn):
    place: PlaceIn


class CreatedRecordOut(_Out):
    record_id: int
    context_id: int


class ContextIdOut(_Out):
    context_id: int


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
    place: PlaceOut
    keywords: list[str] = Field(description="Union over the active contexts (owner view)")
    contexts: list[ContextOut]

    @classmethod
    def of(cls, view: RecordView) -> RecordOut:
        return cls(record_id=view.record_id, place=PlaceOut.of(view.place), keywords=view.keywords,
                   contexts=[ContextOut(context_id=c.context_id, text=c.text,
                                        ai_status=c.ai_status, keywords=c.keywords)
                             for c in view.contexts])


class RecordListOut(_Out):
    records: list[RecordOut]


class PublicKeywordsOut(_Out):
    record_id: int
    place: PlaceOut
    keywords: list[str] = Field(description="PUBLIC keywords only (display names)")

    @classmethod
    def of(cls, view: PublicKeywordsView) -> PublicKeywordsOut:
        return cls(record_id=view.record_id, place=PlaceOut.of(view.place), keywords=view.keywords)


class MeOut(_Out):
    member_id: int
