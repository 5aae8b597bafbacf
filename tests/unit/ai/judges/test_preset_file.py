"""The preset file format and the project's own default preset file (SPEC §8)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pinlog.ai.presets import PresetFileError, load_preset_file, parse_presets

SHARED = Path(__file__).resolve().parents[4].parent / "shared" / "data" / "presets_ko.yaml"
HANGUL = re.compile(r"[\uac00-\ud7a3]")
LATIN = re.compile(r"[A-Za-z]{3,}")


def test_default_file_is_valid_bilingual_and_in_id_blocks():
    presets = load_preset_file()
    assert 25 <= len(presets) <= 30
    blocks = {"COMPANION": 1, "ACTIVITY": 2, "ATMOSPHERE": 3, "SITUATION": 4}
    assert {p.category for p in presets} == set(blocks)
    for p in presets:
        assert p.id // 100 == blocks[p.category], p.code
        assert HANGUL.search(p.display_name), p.code
        assert HANGUL.search(p.description) and LATIN.search(p.description), p.code
        assert any(HANGUL.search(e) for e in p.examples), p.code
        assert any(LATIN.search(e) for e in p.examples), p.code
        assert 2 <= len(p.examples) <= 5 and p.version == 1
        # cues state the preset outright, in Korean and English
        assert len(p.cues) >= 3 and any(HANGUL.search(c) for c in p.cues), p.code
        assert any(LATIN.search(c) for c in p.cues), p.code
    private = {p.code for p in presets if p.visibility == "PRIVATE_ONLY"}
    assert "WITH_COLLEAGUES" in private


def test_cues_are_optional_cleaned_and_deduplicated():
    [preset] = parse_presets({"presets": [{**GOOD, "cues": [" 조용 하다 ", "조용 하다", "quiet"]}]})
    assert preset.cues == ("조용 하다", "quiet")
    assert parse_presets({"presets": [GOOD]})[0].cues == ()
    assert parse_presets({"presets": [{**GOOD, "cues": None}]})[0].cues == ()


def test_a_file_without_cues_inherits_the_packaged_cues_by_code(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"presets": [GOOD, {**GOOD, "id": 302, "code": "COZY",
                                                       "cues": []},
                                                {**GOOD, "id": 999, "code": "NOT_OURS"}]},
                                   allow_unicode=True))
    default = {p.code: p.cues for p in load_preset_file()}
    quiet, cozy, unknown = load_preset_file(path)
    assert quiet.cues == default["QUIET"] and quiet.cues
    assert cozy.cues == () and unknown.cues == ()  # explicit [] stays empty; unknown code: none
    assert all(p.cues == () for p in load_preset_file(path, inherit_cues=False))


def test_the_content_hash_covers_everything_a_judge_uses():
    [base] = parse_presets({"presets": [{**GOOD, "cues": ["조용"]}]})
    changes = [{"display_name": "x"}, {"description": "x"}, {"examples": ("a", "c")},
               {"cues": ("한적",)}, {"visibility": "BLOCKED"}, {"category": "SITUATION"}]
    hashes = {base.content_hash()} | {replace(base, **c).content_hash() for c in changes}
    assert len(hashes) == 1 + len(changes)
    # the version and the active flag are not content
    assert replace(base, version=9, is_active=False).content_hash() == base.content_hash()


@pytest.mark.skipif(not SHARED.exists(), reason="shared data not present")
def test_shared_file_loads_and_its_codes_keep_their_meaning_in_the_default_file():
    shared = load_preset_file(SHARED)
    assert len(shared) == 27
    default = {p.id: p for p in load_preset_file()}
    for p in shared:
        assert p.id in default and default[p.id].code == p.code
        assert default[p.id].category == p.category
    # the project's own text is not copied from the shared file
    assert not {e for p in shared for e in p.examples} & {e for p in default.values()
                                                         for e in p.examples}
    # the shared file has no cues: each preset takes the packaged cues of its code
    assert all(p.cues == default[p.id].cues and p.cues for p in shared)
    assert all(p.cues == () for p in load_preset_file(SHARED, inherit_cues=False))


GOOD = {"id": 301, "code": "QUIET", "display_name": "조용한", "category": "ATMOSPHERE",
        "description": "quiet", "examples": ["a", "b"]}


@pytest.mark.parametrize(("change", "message"), [
    ({"category": "good mood"}, "preset id 301: category"),
    ({"category": "mood"}, "preset id 301: category"),
    ({"category": "M" * 41}, "preset id 301: category"),
    ({"category": None}, "preset id 301: category"),
    ({"visibility": "SECRET"}, "preset id 301: visibility"),
    ({"description": "  "}, "preset id 301: description"),
    pytest.param({"examples": ["only one"]}, "preset id 301: examples", id="one-example"),
    ({"examples": list("abcdef")}, "preset id 301: examples"),
    ({"examples": ["a", ""]}, "preset id 301: examples"),
    ({"code": "quiet"}, "preset id 301: code"),
    ({"id": "301"}, "id must be a positive integer"),
    pytest.param({"exampels": ["a", "b"]}, "preset id 301: unknown fields", id="unknown-field"),
    ({"version": 0}, "preset id 301: version"),
    ({"cues": "맥주"}, "preset id 301: cues must be a list"),
    ({"cues": ["맥주", ""]}, "preset id 301: cues must be non-empty"),
    ({"cues": ["x" * 41]}, "preset id 301: cues must be non-empty strings of at most 40"),
    ({"cues": [3]}, "preset id 301: cues must be non-empty"),
    # nothing visible once normalised (pinlog.text.normalize drops zero-width characters)
    pytest.param({"cues": ["조용", "\u200b"]}, "preset id 301: cues must be non-empty .*item 2",
                 id="invisible-cue"),
    # values of another type than the field's are never coerced
    pytest.param({"id": True}, "id must be a positive integer", id="bool-id"),
    pytest.param({"version": "2"}, "preset id 301: version must be a positive integer",
                 id="string-version"),
    pytest.param({"examples": ("a", "b")}, "preset id 301: examples must be a list",
                 id="tuple-examples"),
    pytest.param({"visibility": None}, "preset id 301: visibility must be one of PUBLIC, "
                 "PRIVATE_ONLY, BLOCKED \\(got null\\)", id="null-visibility"),
])
def test_invalid_entries_are_refused_with_the_entry_id(change, message):
    with pytest.raises(PresetFileError, match=message):
        parse_presets({"presets": [{**GOOD, **change}]})


def test_every_problem_is_one_line_naming_the_file_the_entry_and_the_field(tmp_path):
    """All problems at once (not only the first), in file order; an entry whose id is wrong is
    named by its position and code."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"presets": [
        {**GOOD, "category": "good mood", "exampels": [], "examples": ["a", " "]},
        "not a mapping",
        {**GOOD, "id": "302", "code": "COZY", "display_name": None}]}, allow_unicode=True))
    with pytest.raises(PresetFileError) as refused:
        load_preset_file(path)
    assert str(refused.value).splitlines() == [
        f"{path}: preset id 301: unknown fields ['exampels'] (allowed: id, code, display_name, "
        "category, description, examples, visibility, version, cues)",
        f"{path}: preset id 301: category must be an UPPER_SNAKE_CASE name of at most 40 "
        "characters (e.g. COMPANION, ACTIVITY, ATMOSPHERE, SITUATION) (got 'good mood')",
        f"{path}: preset id 301: examples must be non-empty strings (item 2: got ' ')",
        f"{path}: preset #2: expected a mapping (got 'not a mapping')",
        f"{path}: preset #3 (code 'COZY'): id must be a positive integer (got '302')",
        f"{path}: preset #3 (code 'COZY'): display_name must be a non-empty string (got null)",
    ]


def test_a_file_may_define_categories_beyond_the_four():
    """SPEC §8: "a preset file may define more" categories (the reference is moving to seven)."""
    parsed = parse_presets({"presets": [GOOD, {**GOOD, "id": 501, "code": "SEASON",
                                                 "category": "SEASON_AND_WEATHER"}]})
    assert [p.category for p in parsed] == ["ATMOSPHERE", "SEASON_AND_WEATHER"]


def test_duplicate_ids_and_codes_are_refused():
    other = {**GOOD, "id": 302, "code": "COZY"}
    with pytest.raises(PresetFileError, match="preset id 301: duplicate id"):
        parse_presets({"presets": [GOOD, {**other, "id": 301}]})
    with pytest.raises(PresetFileError, match="preset id 302: duplicate code QUIET"
                                              " \\(also preset id 301, entry #1\\)"):
        parse_presets({"presets": [GOOD, {**other, "code": "QUIET"}]})


def test_file_version_applies_unless_an_entry_sets_its_own(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"version": 4, "presets": [
        GOOD, {**GOOD, "id": 302, "code": "COZY", "version": 5}]}, allow_unicode=True))
    assert [p.version for p in load_preset_file(path)] == [4, 5]


def test_unreadable_or_empty_files_are_clear_errors(tmp_path):
    with pytest.raises(PresetFileError, match="cannot read"):
        load_preset_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("presets: [unclosed")
    with pytest.raises(PresetFileError, match="invalid YAML"):
        load_preset_file(bad)
    bad.write_text("presets: []")
    with pytest.raises(PresetFileError, match="non-empty list"):
        load_preset_file(bad)
