"""Input rules and the member-friendly AI status (no database)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pinlog.core.api.schemas import CreateRecordIn, TextIn
from pinlog.core.services import InvalidInput, PlaceInput, ai_status, validate_place, validate_text


@pytest.mark.parametrize("e,k,expected", [
    ("COMPLETED", "COMPLETED", "ready"), ("COMPLETED", "FAILED", "failed"),
    ("FAILED", "PENDING", "failed"), ("PENDING", "PENDING", "processing"),
    ("COMPLETED", "PROCESSING", "processing"), ("PROCESSING", "PENDING", "processing"),
    (None, None, "processing"),
])
def test_ai_status(e, k, expected):
    assert ai_status(e, k) == expected


def test_text_rules():
    assert validate_text(" 카페 ", 5) == " 카페 "
    assert validate_text("가" * 5, 5) == "가" * 5  # characters, not bytes
    for bad in ("", " ", "\u3000\n", "가" * 6, "a\x00b", None, 1):
        with pytest.raises(InvalidInput):
            validate_text(bad, 5)


def test_place_rules():
    validate_place(PlaceInput("k", "n", -90, 180))
    for bad in (PlaceInput("k", "n", -90.0001, 0), PlaceInput("k", "n", 0, 180.1),
                PlaceInput("", "n", 0, 0), PlaceInput("k", " ", 0, 0),
                PlaceInput("k", "n", 0, 0, address="x" * 501)):
        with pytest.raises(InvalidInput):
            validate_place(bad)


def body(**overrides):
    base = {"place": {"externalPlaceId": "k1", "name": "n", "lat": 37.5, "lng": 127}, "text": "t"}
    base.update(overrides)
    return base


def test_create_record_body_accepts_camel_case():
    parsed = CreateRecordIn.model_validate(body())
    assert parsed.place.to_input() == PlaceInput("k1", "n", 37.5, 127.0)


@pytest.mark.parametrize("bad", [
    body(extra=1), body(text="  "), body(text=3),
    body(place={"externalPlaceId": "k1", "name": "n", "lat": 91, "lng": 0}),
    body(place={"externalPlaceId": "k1", "name": "n", "lat": "37", "lng": 0}),
    body(place={"external_place_id": "k1", "name": "n", "lat": 1, "lng": 0}),
    body(place={"externalPlaceId": "k1", "name": "n", "lat": 1}),
    body(place={"externalPlaceId": "k1", "name": "n", "lat": 1, "lng": 0, "x": 1}),
])
def test_create_record_body_rejects(bad):
    with pytest.raises(ValidationError):
        CreateRecordIn.model_validate(bad)


def test_text_body_rejects_unknown_fields():
    with pytest.raises(ValidationError):
        TextIn.model_validate({"text": "t", "contextId": 1})
