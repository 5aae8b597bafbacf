"""The input models shared by every door into core (issue 27 #10): the public API's request
bodies (:mod:`pinlog.core.api.schemas`) and ``pinlog import`` lines (:mod:`pinlog.core.importer`)
validate a place with the same :class:`PlaceIn`, a note with the same :data:`NonBlank`, so a
value one door refuses the other refuses too (``"lat": "37.5"`` is not a number in either).

Strict types (a number is a JSON number, a string a JSON string), camelCase keys, unknown keys
refused. The services check the same rules again (:func:`pinlog.core.services.validate_place`,
``validate_text``) and normalise what they store.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pinlog.core.services import (
    MAX_ADDRESS_CHARS,
    MAX_PLACE_ID_CHARS,
    MAX_PLACE_NAME_CHARS,
    PlaceInput,
)
from pinlog.text import is_blank


class StrictIn(BaseModel):
    """Base of the input models: camelCase keys, unknown keys refused, strict types."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", strict=True)


def _not_blank(value: str) -> str:
    """422 for a value that is blank once normalised (whitespace or invisible characters only,
    e.g. ``\u3164``, ``\u200b``, ``\ufeff``: :func:`pinlog.text.is_blank`)."""
    if is_blank(value):
        raise ValueError("must not be empty or whitespace")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: A string that must say something: blank once normalised or with NUL → refused
#: (:func:`_not_blank`); the field adds its length limits.
NonBlank = Annotated[str, AfterValidator(_not_blank)]


class PlaceIn(StrictIn):
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
