"""``parse_import_file`` (issue 7): valid lines kept with their 1-based line numbers; every
malformed line reported as ``(line_no, message)`` and skipped; messages never carry note text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlog.core.importer import parse_import_file

SECRET_NOTE = "비밀 메모: 엄마 생신 선물 고른 곳"  # must never appear in an error message


def line(member: str = "m1", ext: str = "ext-1", context: str = "조용한 카페", *,
         lat: object = 37.5, lng: object = 127.0, name: str = "카페", drop: str | None = None,
         drop_place: str | None = None, **extra: object) -> str:
    place = {"name": name, "external_place_id": ext, "address": "서울", "lat": lat, "lng": lng}
    obj: dict[str, object] = {"member": member, "record": "r", "place": place,
                              "context": context, **extra}
    if drop:
        del obj[drop]
    if drop_place:
        del place[drop_place]
    return json.dumps(obj, ensure_ascii=False)


def write(tmp_path: Path, *lines: str, raw: bytes | None = None) -> Path:
    path = tmp_path / "notes.jsonl"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_lines_are_kept_with_their_line_numbers(tmp_path):
    path = write(tmp_path, line("a", "e1"), "", "   ", line("b", "e2", extra_field="ignored"))
    parsed = parse_import_file(path, max_text_chars=2000)
    assert parsed.errors == []
    assert [(n, item.member, item.place.external_place_id) for n, item in parsed.lines] == [
        (1, "a", "e1"), (4, "b", "e2")]  # blank lines are skipped, not errors, but still counted


@pytest.mark.parametrize(("bad", "expected"), [
    ('{"member": "m1", "place": ', "not valid JSON"),
    ("[1, 2, 3]", "the line must be a JSON object"),  # no internal class name (issue 27 #10)
    (line(lat="37.5"), "place.lat: must be a number"),  # strict, as the API (issue 27 #10)
    (line(lng=True), "place.lng: must be a number"),
    (line(member=5), "member: must be a string"),
    (line(member="id:5"), "member: must not start with id: or ref:"),
    (line(member=" 공백 "), "member: must not start or end with whitespace"),
    (line(member="a\u202eb"), "member: must not contain control or bidirectional"),
    (line(ext="e\t1"), "place.external_place_id: must not contain control"),
    (line(drop="member"), "member"),
    (line(drop="context"), "context"),
    (line(drop="place"), "place"),
    (line(drop_place="external_place_id"), "place.external_place_id"),
    (line(drop_place="name"), "place.name"),
    (line(context="   \t "), "context"),
    (line(context=""), "context"),
    (line(lat=91), "place.lat"),
    (line(lat=-90.5), "place.lat"),
    (line(lng=180.01), "place.lng"),
    (line(lat="north"), "place.lat"),
    (line(lat=None), "place.lat"),
    ('{"member": "m1", "place": {"name": "x", "external_place_id": "e", "lat": NaN, "lng": 1},'
     ' "context": "c"}', "place.lat"),
    (line(member=""), "member"),
    (line(context=123), "context"),
    # what the core services would refuse is refused here, before anything is written
    (line(member="  "), "member: must not be empty"),
    (line(member="m\x00"), "member: must not contain NUL"),
    (line(member="m" * 201), "member"),
    (line(context="메모\x00"), "context: must not contain NUL"),
    (line(ext="e" * 201), "place.external_place_id: must be at most 200 characters"),
    (line(ext="   "), "place.external_place_id: must not be empty"),
    (line(name="   "), "place.name: must not be empty"),
])
def test_a_malformed_line_is_reported_and_skipped(tmp_path, bad, expected):
    path = write(tmp_path, line("ok1", "e1"), bad, line("ok2", "e2"))
    parsed = parse_import_file(path, max_text_chars=2000)
    assert [n for n, _ in parsed.lines] == [1, 3]
    assert len(parsed.errors) == 1
    number, message = parsed.errors[0]
    assert number == 2
    assert message.startswith(expected), message


def test_text_longer_than_the_limit_is_refused_and_the_limit_itself_accepted(tmp_path):
    path = write(tmp_path, line(context="가" * 50), line(context="가" * 51, ext="e2"))
    parsed = parse_import_file(path, max_text_chars=50)
    assert [n for n, _ in parsed.lines] == [1]
    assert parsed.errors == [(2, "context: is longer than 50 characters")]


def test_error_messages_never_contain_the_note_text(tmp_path):
    lines = [
        '{"member": "m1", "context": "' + SECRET_NOTE + '", "place": {',  # bad JSON
        line(context=SECRET_NOTE, drop_place="name"),
        line(context=SECRET_NOTE, lat=200),
        line(context=SECRET_NOTE * 100),
        json.dumps({"member": SECRET_NOTE * 20, "place": {}, "context": SECRET_NOTE},
                   ensure_ascii=False),
    ]
    parsed = parse_import_file(write(tmp_path, *lines), max_text_chars=200)
    assert [n for n, _ in parsed.errors] == [1, 2, 3, 4, 5]
    for _, message in parsed.errors:
        assert SECRET_NOTE not in message and "비밀" not in message, message


def test_a_utf8_byte_order_mark_does_not_break_the_first_line(tmp_path):
    raw = ("\ufeff" + line("a", "e1") + "\r\n" + line("b", "e2") + "\r\n").encode("utf-8")
    parsed = parse_import_file(write(tmp_path, raw=raw), max_text_chars=2000)
    assert parsed.errors == []
    assert [n for n, _ in parsed.lines] == [1, 2]


def test_a_line_that_is_not_utf8_is_reported_not_raised(tmp_path):
    raw = (line("a", "e1").encode() + b"\n" + b'{"member": "\xff\xfe"}\n'
           + line("b", "e2").encode() + b"\n")
    parsed = parse_import_file(write(tmp_path, raw=raw), max_text_chars=2000)
    assert [n for n, _ in parsed.lines] == [1, 3]
    assert [(n, m.split(" (")[0]) for n, m in parsed.errors] == [(2, "not valid UTF-8")]


def test_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        parse_import_file(tmp_path / "absent.jsonl", max_text_chars=2000)
