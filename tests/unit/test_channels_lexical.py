"""The lexical channel's rules in the shared kernel (SPEC §10, issue 28: ``pinlog.channels``):
what a query asks for (content words, generic words, the variant table), coverage per word,
the doubt of a partial match, filler queries, and the ai side's reading of ``placeMeta``.
No database."""

from __future__ import annotations

import pytest

from pinlog.channels.base import RelevanceRule
from pinlog.channels.lexical import (
    MAX_SEARCH_TERMS,
    LexicalFound,
    LexicalMatch,
    LexicalQuery,
    analyse_query,
    is_filler,
    matches_from_rows,
    place_meta_text,
)
from pinlog.channels.variants import VariantTableError, default_table, parse, sound_key
from pinlog.contracts import SearchResponse
from pinlog.text import lexical_terms

RULE = RelevanceRule(min_coverage=0.63, doubt_coverage=0.7, doubt_strength=5.5)


def covers(query: str, note: str, place: str = "") -> float:
    """Coverage of ``query`` by a record with this note and place."""
    return analyse_query(query).coverage(frozenset(lexical_terms(note)) | frozenset(lexical_terms(place)))


def test_content_words_are_nouns_adjectives_and_foreign_words_never_verbs_adverbs_or_generic():
    q = analyse_query("친구들이랑 맥주 마신 곳")
    # 마신 (a verb), 곳 (generic), the particle 이랑: no content
    assert {t for u in q.units for t in u} == {"친구", "구들", "맥주"}
    assert analyse_query("좋은 곳").content == frozenset()  # nothing asked: no lexical evidence
    assert [sorted(u) for u in analyse_query("a quiet place to study").units] == [["quiet"], ["study"]]
    assert analyse_query("자주 갔던 곳").content == frozenset()  # an adverb and a verb


def test_coverage_is_per_word_not_per_bigram():
    # 노트북 has two bigrams, 수리 one: a note about a laptop covers one word of two
    assert covers("노트북 수리", "노트북 들고 와서 작업했다") == pytest.approx(0.5)
    assert covers("중고 노트북 매장", "노트북 들고 와서 작업했다") == pytest.approx(1 / 3)
    assert covers("피넛커피", "소파가 편한 카페", "피넛커피 충북혁신도시점") == 1.0


def test_a_one_syllable_adjective_gives_no_word_a_one_syllable_noun_its_bigram():
    # 많은 / 많아서: the stem's endings vary, so the adjective asks for nothing lexically
    assert covers("콘센트 많은 곳", "콘센트도 많아서 집중이 잘 됐다") == 1.0
    assert [sorted(u) for u in analyse_query("꽃을 주는 서점").units] == [["꽃을"], ["서점"]]


@pytest.mark.parametrize(("query", "note"), [
    ("돈가스", "두툼한 돈카츠에 카레 추가"),          # other spelling
    ("tonkatsu", "두툼한 돈카츠에 카레 추가"),        # other language
    ("돈카츠", "Thick pork cutlet with crispy panko"),  # a phrase form
    ("스시", "연어 초밥이 신선하다"),                  # another word
    ("채식", "비건 식당, 두부 스테이크"),
    ("조용한 카페", "Quiet cafe with big windows"),
    ("black bean noodles", "중국집 짜장면이랑 탕수육"),
    ("라멘집", "진한 돈코츠 라멘"),                   # a form inside a longer word
])
def test_the_variant_table_covers_spellings_synonyms_and_languages(query, note):
    assert covers(query, note) == 1.0
    assert covers(query, "세탁소에 맡긴 코트") == 0.0


def test_sound_keys_find_spellings_the_table_does_not_list():
    table = default_table()
    assert "돈까쓰" not in {f for c in table.concepts.values() for f in c.forms}
    assert sound_key("돈까쓰") == sound_key("돈가스") and sound_key("떡뽂이") == sound_key("떡볶이")
    assert sound_key("피자") != sound_key("비싸")  # aspirated and plain stay apart
    assert covers("돈까쓰", "두툼한 돈카츠") == 1.0
    exact = default_table(sound=False)
    assert analyse_query("돈까쓰", exact).coverage(frozenset(lexical_terms("두툼한 돈카츠"))) == 0.0


def test_narrower_concepts_are_found_from_the_broader_word_only():
    assert covers("술집", "이자카야에서 하이볼") == 1.0          # bar → izakaya (narrower)
    assert covers("이자카야", "동네 술집에서 한잔") == 0.0        # never the other way round


def test_compounds_are_found_by_their_parts_and_find_notes_naming_all_parts():
    assert covers("맥주", "친구들이랑 피맥했음") == 1.0           # 피맥 = pizza + beer
    assert covers("피맥", "화덕 피자에 생맥주") == 1.0
    assert covers("피맥", "화덕 피자가 맛있다") == 0.0            # one part is not the compound


def test_one_character_forms_match_only_one_character_words():
    table = default_table()
    assert "빵" in table.concepts["bread"].forms
    assert covers("빵", "빵 종류가 많다") == 1.0
    assert "bread" not in {n.concept for n in analyse_query("빵빠레").named}


def test_the_search_terms_are_bounded():
    for query in ("식당", "디저트 맛집", "술집 고기 면 요리 디저트"):
        lexical = analyse_query(query)
        assert len(lexical.search_terms) <= MAX_SEARCH_TERMS
        assert lexical.content <= set(lexical.search_terms)


@pytest.mark.parametrize("query", ["ㅎㅎ", "ㅋㅋ", "ㅠㅠ", "?", "...", "!!!", "🍕", "ㅋㅋㅋ ㅎㅎ"])
def test_filler_queries_ask_for_nothing(query):
    assert is_filler(query)


@pytest.mark.parametrize("query", ["카페", "ramen", "2차", "寿司"])
def test_a_word_is_not_filler(query):
    assert not is_filler(query)


def found(query: str, notes: dict[int, str], place: str = "") -> LexicalFound:
    lexical = analyse_query(query)
    wanted = frozenset(lexical.search_terms)
    match = LexicalMatch({cid: wanted & frozenset(lexical_terms(t)) for cid, t in notes.items()},
                         wanted & frozenset(lexical_terms(place)))
    return LexicalFound({1: match}, lexical, RULE)


def test_a_partial_match_doubts_a_full_one_vouches():
    cosines = {1: {10: 0.8}}
    [partial] = found("중고 노트북 매장", {10: "노트북 들고 와서 작업했다"}).evidence(
        SearchResponse(results=[]), cosines).values()
    assert (partial.vouched, partial.doubt) == (False, RULE.doubt_strength)
    [full] = found("노트북 작업", {10: "노트북 들고 와서 작업했다"}).evidence(
        SearchResponse(results=[]), cosines).values()
    assert (full.vouched, full.doubt, full.matched_by, full.context_id) == (True, None, ("text",), 10)
    assert found("세탁소", {10: "노트북 들고 와서"}).evidence(SearchResponse(results=[]), cosines) == {}


def test_no_doubt_without_a_calibrated_strength():
    f = found("중고 노트북 매장", {10: "노트북 들고 와서 작업했다"})
    f.rule = RelevanceRule(doubt_strength=None)
    [e] = f.evidence(SearchResponse(results=[]), {1: {10: 0.8}}).values()
    assert e.doubt is None


def test_the_doubt_is_the_answering_profiles_not_the_callers():
    """SPEC §9.1/§10: after a profile switch the vector answer's strengths are the new profile's,
    so a doubted record needs that profile's doubt strength (``doubtStrength`` of the answer),
    not the one core's rule was built with at start-up; an answer without the field (an older
    ai side) leaves the caller's."""
    f = found("중고 노트북 매장", {10: "노트북 들고 와서 작업했다"})
    cosines = {1: {10: 0.8}}
    [e] = f.evidence(SearchResponse(results=[], doubt_strength=7.25), cosines).values()
    assert e.doubt == 7.25
    [e] = f.evidence(SearchResponse(results=[], doubt_strength=None), cosines).values()
    assert e.doubt is None  # the answering profile has no calibrated strength: no doubt
    [e] = f.evidence(SearchResponse.model_validate({"results": []}), cosines).values()
    assert e.doubt == RULE.doubt_strength
    # the kernel keeps the answer's doubt when it adds the scored contexts
    answer = SearchResponse(results=[], doubt_strength=7.25)
    merged = answer.model_copy(update={"scored": []})
    assert merged.doubt_or(1.0) == 7.25


def test_place_words_are_reported_as_place():
    [e] = found("피넛커피", {10: "소파가 편한 카페"}, "피넛커피 충북혁신도시점").evidence(
        SearchResponse(results=[]), {1: {10: 0.5}}).values()
    assert e.vouched and e.matched_by == ("place",) and e.context_id is None


def test_rows_of_both_components_become_matches():
    lexical = LexicalQuery(("a", "b", "c"), frozenset("abc"))
    core_rows = [(10, 1, ["a", "zz"], None), (None, 1, None, ["b"]), (20, 2, ["c"], None)]
    ai_rows = [(10, 1, ["a"], ["b"]), (11, 1, [], ["b"]), (20, 2, ["c"], [])]
    for rows in (core_rows, ai_rows):
        matches = matches_from_rows(rows, lexical)
        assert matches[1].note_terms[10] == {"a"} and matches[1].place_terms == {"b"}
        assert matches[2].note_terms[20] == {"c"} and matches[2].place_terms == frozenset()


def test_place_meta_text_reads_the_name_and_address_keys_only():
    assert place_meta_text({"externalPlaceId": "kakao-1", "name": "카페 온다", "address": "서울 중구",
                            "roadAddress": "세종대로 1", "lat": 37.5}) == "카페 온다 서울 중구 세종대로 1"
    assert place_meta_text({"place_name": "Bean Lab", "road_address_name": "Main St"}) == "Bean Lab Main St"
    assert place_meta_text({"name": 5, "memo": "비밀"}) == ""
    assert place_meta_text(None) == "" and place_meta_text([1]) == ""  # type: ignore[arg-type]


def test_the_packaged_table_loads_and_a_wrong_table_is_refused():
    assert len(default_table().concepts) > 150
    with pytest.raises(VariantTableError, match="unknown concept 'nope'"):
        parse({"concepts": {"bar": {"forms": ["술집"], "narrower": ["nope"]}}}, "t.yaml")
    with pytest.raises(VariantTableError, match="t.yaml"):
        parse({"concepts": {"bar": {"forms": []}}}, "t.yaml")
    with pytest.raises(VariantTableError):
        parse({"concepts": {"bar": [1]}}, "t.yaml")
