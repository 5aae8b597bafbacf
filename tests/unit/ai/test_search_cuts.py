"""The vector channel's evidence cuts applied after the SQL (SPEC §10): per-profile absolute
floor (lower for one-word queries) and relative cut to the top hit; the top hit is cut like any
other (issue 10: an off-topic query gets no result)."""

from __future__ import annotations

import numpy as np
import pytest

from pinlog.ai.calibration import PROFILE_DEFAULTS, Calibration
from pinlog.ai.search import SearchCuts, apply_cuts, is_short_query, to_pgvector
from pinlog.contracts import SearchHit

CUTS = SearchCuts(floor=0.5, short_query_floor=0.7, ratio=0.8)
MULTI = "quiet cafe for reading"
ONE = "cafe"


def hits(*similarities: float) -> list[SearchHit]:
    """Hits ordered as the SQL returns them (best first), record/context ids 1, 2, 3 …"""
    return [SearchHit(record_id=i, context_id=100 + i, similarity=s)
            for i, s in enumerate(similarities, start=1)]


def ids(kept: list[SearchHit]) -> list[int]:
    return [h.record_id for h in kept]


def test_no_hits_stays_empty():
    assert apply_cuts([], MULTI, CUTS) == []


@pytest.mark.parametrize("query", [MULTI, ONE])
def test_top_hit_under_the_floor_is_cut_too(query):
    assert apply_cuts(hits(0.10, 0.09, 0.05), query, CUTS) == []
    kept = apply_cuts(hits(0.75, 0.09, 0.05), query, CUTS)  # at/above both floors
    assert ids(kept) == [1] and kept[0].context_id == 101 and kept[0].similarity == 0.75


def test_negative_top_hit_is_cut():
    assert apply_cuts(hits(-0.2, -0.3), MULTI, CUTS) == []


def test_floor_drops_hits_below_it_and_keeps_hits_at_it():
    # ratio is out of the way (0.8 × 0.6 = 0.48 < every hit)
    kept = apply_cuts(hits(0.60, 0.55, 0.50, 0.49), MULTI, CUTS)
    assert ids(kept) == [1, 2, 3]


def test_one_word_query_uses_the_short_query_floor():
    similarities = (0.80, 0.72, 0.68, 0.66)
    # multi-word: floor 0.5 and ratio 0.64 keep all four
    assert ids(apply_cuts(hits(*similarities), MULTI, CUTS)) == [1, 2, 3, 4]
    # one word: floor 0.7 → only 0.80 and 0.72
    assert ids(apply_cuts(hits(*similarities), ONE, CUTS)) == [1, 2]
    # surrounding whitespace does not make a second word
    assert ids(apply_cuts(hits(*similarities), f"  {ONE}\t", CUTS)) == [1, 2]


def test_a_lower_short_query_floor_keeps_more_for_one_word():
    cuts = SearchCuts(floor=0.82, short_query_floor=0.80, ratio=0.0)  # the default profile's shape
    similarities = (0.86, 0.81, 0.805, 0.79)
    assert ids(apply_cuts(hits(*similarities), "야경 맛집", cuts)) == [1]
    assert ids(apply_cuts(hits(*similarities), "야경", cuts)) == [1, 2, 3]


def test_ratio_to_the_top_hit():
    cuts = SearchCuts(floor=-1.0, short_query_floor=-1.0, ratio=0.9)
    # 0.9 × 0.9 = 0.81: 0.81 is kept (>=), 0.8 is not
    kept = apply_cuts(hits(0.90, 0.85, 0.81, 0.80, 0.2), MULTI, cuts)
    assert ids(kept) == [1, 2, 3]


def test_both_cuts_apply_the_stricter_wins():
    cuts = SearchCuts(floor=0.84, short_query_floor=0.0, ratio=0.9)
    # ratio threshold 0.81 but floor 0.84
    assert ids(apply_cuts(hits(0.90, 0.85, 0.83), MULTI, cuts)) == [1, 2]
    # floor 0.0 for one word, ratio 0.81 decides
    assert ids(apply_cuts(hits(0.90, 0.85, 0.83, 0.80), ONE, cuts)) == [1, 2, 3]


def test_order_is_preserved_and_hits_are_not_modified():
    given = hits(0.9, 0.88, 0.87)
    kept = apply_cuts(given, MULTI, SearchCuts(0.0, 0.0, 0.0))
    assert kept == given
    assert [h.similarity for h in given] == [0.9, 0.88, 0.87]


@pytest.mark.parametrize(("query", "short"), [
    ("카페", True), ("  카페  ", True), ("", True), ("조용한 카페", False),
    ("비 오는 날 가려고 저장한 곳", False), ("a\tb", False), ("a\nb", False),
])
def test_is_short_query_counts_whitespace_separated_words(query, short):
    assert is_short_query(query) is short


def test_cuts_from_calibration():
    cal = PROFILE_DEFAULTS["local-e5-small-q4-384-cosine-v1"]
    cuts = SearchCuts.from_calibration(cal)
    assert cuts == SearchCuts(cal.search_floor, cal.search_short_query_floor, cal.search_ratio)
    assert isinstance(cal, Calibration)


def test_to_pgvector_literal_keeps_the_vector():
    v = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    literal = to_pgvector(v)
    assert literal.startswith("[") and literal.endswith("]") and " " not in literal
    parsed = np.array([float(x) for x in literal[1:-1].split(",")], dtype=np.float32)
    assert parsed.shape == (384,)
    # 8 significant digits: within one float32 ulp, far below any similarity difference that matters
    np.testing.assert_allclose(parsed, v, rtol=1e-7, atol=0)


def test_the_openai_profiles_cut_at_the_reference_systems_cosines():
    """Issue 23: text-embedding-3-small (OpenAI and Azure OpenAI profiles) is cut where the
    reference system cuts it in production — cosine 0.30 for several words, 0.24 for one word,
    no ratio to the top hit — not at guessed values."""
    from pinlog.ai.providers import azure_openai, openai

    for profile in (openai.PROFILE, azure_openai.PROFILE):
        cuts = SearchCuts.from_calibration(PROFILE_DEFAULTS[profile])
        assert [h.similarity for h in apply_cuts(hits(0.45, 0.31, 0.30, 0.29), MULTI, cuts)] == \
            [0.45, 0.31, 0.30]
        assert [h.similarity for h in apply_cuts(hits(0.27, 0.24, 0.239), "카페", cuts)] == \
            [0.27, 0.24]
        # no ratio: a hit far below the top one is still vouched for when above the floor
        assert len(apply_cuts(hits(0.9, 0.31), MULTI, cuts)) == 2
