"""core's relevance decision over its channels (SPEC §10, :mod:`pinlog.core.channels`: the vector
and lexical channels — their rules are the shared kernel's, :mod:`pinlog.channels` — fused by
:func:`pinlog.relevance.decide`) and the lexical terms they count (:func:`pinlog.text.lexical_terms`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pinlog.channels.lexical import LexicalFound, LexicalMatch, LexicalQuery
from pinlog.channels.vector import VectorFound
from pinlog.contracts import SearchHit, SearchResponse
from pinlog.core import channels
from pinlog.core.channels import RelevanceRule
from pinlog.text import lexical_terms

RULE = RelevanceRule(min_coverage=0.35, rrf_k=60)


def query_of(n: int) -> LexicalQuery:
    """A query of ``n`` content terms ``"a"``, ``"b"``, … (each its own word)."""
    terms = tuple("abcdefgh"[:n])
    return LexicalQuery(terms, frozenset(terms))


def test_lexical_terms_bigrams_for_hangul_words_for_latin():
    assert lexical_terms("피넛커피") == ["피넛", "넛커", "커피"]
    assert lexical_terms("책") == ["책"]
    assert lexical_terms("Quiet CAFES near the Station!") == ["quiet", "cafe", "near", "station"]
    assert lexical_terms("2차로") == ["2", "차로"]


@pytest.mark.parametrize("text", ["", "   ", "!!!", "🍕🍺", "ㅋㅋㅋ", "?!... —", "\u200b", "'\\"])
def test_lexical_terms_of_punctuation_emoji_or_jamo_are_empty(text):
    assert lexical_terms(text) == []


def test_lexical_terms_are_safe_tsquery_lexemes():
    for text in ("it's a 'quoted' \\ back:slash & | !", "a_b c:d", "é café naïve"):
        for term in lexical_terms(text):
            assert term.strip() == term and not set(term) & set("'\\:&|!() ")


@dataclass
class Cand:
    """One record as the ai side and the lexical channel see it: its scored contexts' cosines
    (``sims``), whether the ai side vouched for it (its first context), and its lexical match."""

    record_id: int
    sims: dict[int, float]
    vector: bool
    match: LexicalMatch


def cand(record_id, sims, *, vector=False, notes=None, place=()):
    return Cand(record_id, dict(sims), vector,
                LexicalMatch({k: frozenset(v) for k, v in (notes or {}).items()}, frozenset(place)))


def decide(cands, query_terms, rule, limit):
    """core's decision (:func:`pinlog.core.channels.decide`) for these records: the registered
    channels' findings, and the ai side's answer (``results``: the vouched records; ``scored``:
    every context with a cosine)."""
    lexical = {c.record_id: c.match for c in cands if c.match.note_terms or c.match.place_terms}
    found = [VectorFound(), LexicalFound(lexical, query_of(query_terms), rule)]
    response = SearchResponse(
        results=[SearchHit(record_id=c.record_id, context_id=next(iter(c.sims)), similarity=c.sims[next(iter(c.sims))])
                 for c in cands if c.vector],
        scored=[SearchHit(record_id=c.record_id, context_id=cid, similarity=sim)
                for c in cands for cid, sim in c.sims.items()])
    return channels.decide(found, response, rule, limit)


def test_the_registry_lists_the_vector_then_the_lexical_channel():
    assert [c.__name__ for c in channels.CHANNELS] == ["VectorChannel", "LexicalChannel"]
    assert channels.MATCHED_BY == ("vector", "text", "place")


def test_no_evidence_means_no_result_even_for_the_best_cosine():
    assert decide([cand(1, {10: 0.95}), cand(2, {20: 0.5})], 3, RULE, 20) == []


def test_a_record_without_any_scored_context_is_never_shown():
    assert decide([cand(1, {}, notes={10: {"a", "b"}})], 2, RULE, 20) == []


def test_lexical_evidence_needs_the_coverage_threshold():
    weak = cand(1, {10: 0.1}, notes={10: {"a"}})          # 1/3 < 0.35
    strong = cand(2, {20: 0.1}, notes={20: {"a", "b"}})   # 2/3
    assert query_of(3).coverage(weak.match.terms(weak.sims)) == pytest.approx(1 / 3)
    [d] = decide([weak, strong], 3, RULE, 20)
    assert (d.record_id, d.context_id, d.matched_by) == (2, 20, ("text",))


def test_place_terms_count_and_are_reported():
    [d] = decide([cand(1, {10: 0.2}, place={"a"})], 1, RULE, 20)
    assert d.matched_by == ("place",) and d.similarity == 0.2


def test_words_of_a_note_without_an_embedding_do_not_count():
    # context 11 matched lexically but the ai side did not score it (not searchable)
    c = cand(1, {10: 0.3}, notes={11: {"a", "b"}})
    assert decide([c], 2, RULE, 20) == []


def test_rrf_puts_a_record_with_both_kinds_of_evidence_first_and_shows_the_matching_note():
    vector_only = cand(1, {10: 0.90}, vector=True)
    both = cand(2, {20: 0.88, 21: 0.80}, vector=True, notes={21: {"a", "b"}})
    text_only = cand(3, {30: 0.70}, notes={30: {"a", "b"}})
    out = decide([vector_only, both, text_only], 2, RULE, 20)
    # RRF: both (1/62 + 1/61) > text only (1/63 + 1/61) > vector only (1/61)
    assert [d.record_id for d in out] == [2, 3, 1]
    assert out[0].matched_by == ("vector", "text")
    assert (out[0].context_id, out[0].similarity) == (21, 0.80)  # the note whose words matched
    assert out[2].matched_by == ("vector",) and out[2].context_id == 10
    assert out[1].matched_by == ("text",)
    assert decide([vector_only, both, text_only], 2, RULE, 1)[0].record_id == 2  # limit


def test_the_decision_does_not_depend_on_how_many_other_records_there_are():
    target = cand(1, {10: 0.5}, notes={10: {"a"}})
    alone = decide([target], 2, RULE, 20)
    crowd = [cand(i, {i * 10: 0.4}) for i in range(2, 10_000)]
    among = decide([target, *crowd], 2, RULE, 20)
    assert [d.record_id for d in alone] == [d.record_id for d in among] == [1]
