"""The one text normalisation (pinlog.text.normalize / is_blank): NFC, compatibility folding that
keeps Hangul compatibility jamo, invisible characters removed, blank = nothing visible."""

import unicodedata

import pytest

from pinlog.contracts import ProcessRequest, SearchRequest
from pinlog.text import content_terms, is_blank, normalize

RAIN = "비 오는 날 빗소리 들으며 앉아 있기 좋은 다방"

#: Invisible-only inputs (each alone and mixed with whitespace): blank.
INVISIBLE = ["\u3164", "\u200b", "\ufeff", "\u2800", "\u00ad", "\uffa0", "\u115f\u1160",
             "\u2060", "\u200d", "\u200c", "\u200e\u200f", "\u180e", "\ufe0f", "\u3164 \u200b\n"]


@pytest.mark.parametrize("form", ["NFD", "NFKD"])
def test_decomposed_note_normalises_to_the_composed_one(form):
    assert normalize(unicodedata.normalize(form, RAIN)) == RAIN


def test_compatibility_characters_fold_except_hangul_compatibility_jamo():
    assert normalize("Ａ１\u3000카페\u00a0①") == "A1 카페 1"
    assert normalize("ㅋㅋ 맛있다 ㅠㅠ") == "ㅋㅋ 맛있다 ㅠㅠ"  # NFKC would give conjoining jamo
    assert normalize("ﾡﾢ") == "ㄱㄲ"  # half-width Hangul → compatibility jamo
    # the reason: Kiwi tags conjoining-jamo ᄏᄏ as a noun (a false content term), ㅋㅋ as a symbol
    assert content_terms(normalize("ㅋㅋ 맛있다")) == content_terms("ㅋㅋ 맛있다")
    assert not any("\u1100" <= ch <= "\u11ff" for t in content_terms("ㅋㅋ 맛있다") for ch in t)


def test_invisible_characters_are_removed_and_fillers_become_spaces():
    assert normalize("비\u200b 오는\ufeff 날\u00ad") == "비 오는 날"
    assert normalize("비\u3164오는") == "비 오는"


@pytest.mark.parametrize("text", INVISIBLE)
def test_invisible_only_text_is_blank(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", ["ㅋ", "a", "1", "!", "👍", "\u200b비"])
def test_visible_text_is_not_blank(text):
    assert not is_blank(text)


def test_normalize_is_idempotent_on_mixed_input():
    mixed = unicodedata.normalize("NFD", RAIN) + "\u200b Ｑ ㅋ ﾡ ㈀ ㈎ 👨\u200d👩\u200d👧"
    once = normalize(mixed)
    assert normalize(once) == once


@pytest.mark.parametrize("text", INVISIBLE)
def test_contract_refuses_invisible_only_text_and_query(text):
    with pytest.raises(ValueError):
        ProcessRequest(context_id=1, user_id=1, record_id=1, text=text)
    with pytest.raises(ValueError):
        SearchRequest(user_id=1, query=text, embedding_profile="p")


def test_contract_normalises_text_so_nfd_and_nfc_hash_alike():
    from pinlog.ai.pipeline import text_sha256

    nfd = ProcessRequest(context_id=1, user_id=1, record_id=1,
                         text=unicodedata.normalize("NFD", RAIN))
    assert nfd.text == RAIN
    assert text_sha256(nfd.text) == text_sha256(RAIN)
    query = SearchRequest(user_id=1, query=unicodedata.normalize("NFD", "비 오는 날"),
                          embedding_profile="p")
    assert query.query == "비 오는 날"


# --- issue 27 #6: bidi and control characters ---------------------------------------------------

@pytest.mark.parametrize(("raw", "text", "line"), [
    ("\u202eevil\u202c", "evil", "evil"),
    ("a\u2066b\u2069c\u200e\u200f\u061c", "abc", "abc"),
    ("bell\x07 esc\x1b[0m del\x7f c1\x9b", "bell esc[0m del c1", "bell esc[0m del c1"),
    ("two\nlines\r\n\ttab", "two\nlines\r\n\ttab", "two lines   tab"),
    ("sep\u2028para\u2029nel\x85", "sep\u2028para\u2029nel\x85", "sep para nel "),
])
def test_bidi_and_control_characters_are_removed_and_one_line_fields_lose_line_breaks(raw, text, line):
    from pinlog.text import normalize_line

    assert normalize(raw) == text and normalize(text) == text
    assert normalize_line(raw) == line and normalize_line(line) == line


def test_only_bidi_or_control_characters_is_blank():
    assert is_blank("\u202e\u202c") and is_blank("\x07\x1b") and not is_blank("\u202ea")


@pytest.mark.parametrize(("value", "problem"), [
    ("kakao-1", None), ("공 백", None), (" 공백 ", "must not start or end with whitespace"),
    ("a\u202eb", "must not contain control or bidirectional formatting characters"),
    ("a\tb", "must not contain control or bidirectional formatting characters"),
])
def test_identifiers_are_kept_exact_and_refused_when_they_would_display_wrong(value, problem):
    from pinlog.text import identifier_problem

    assert identifier_problem(value) == problem
