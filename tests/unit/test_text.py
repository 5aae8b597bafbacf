"""pinlog.text: normalisation and Korean content terms (real kiwipiepy model)."""

import unicodedata

from pinlog.text import content_terms, normalize


def test_normalize_composes_decomposed_hangul() -> None:
    composed = "비 오는 날 다방"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    assert normalize(decomposed) == composed


def test_content_terms_give_stems_and_nouns() -> None:
    terms = content_terms("부트캠프 친구들과 자주 먹었던 돈카츠 집")
    assert {"부트캠프", "친구", "먹다", "돈카츠"} <= set(terms)
    assert "과" not in terms and "던" not in terms


def test_content_terms_decomposed_equals_composed() -> None:
    text = "밥먹고 산책하면서"
    assert content_terms(unicodedata.normalize("NFD", text)) == content_terms(text)
    assert "산책" in content_terms(text)


def test_content_terms_english_lower_cased() -> None:
    assert content_terms("Quiet Coffee") == ["quiet", "coffee"]
