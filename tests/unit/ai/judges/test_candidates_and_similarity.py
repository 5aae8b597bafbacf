"""Candidate selection, the SPEC §8 mapping rules and the similarity judge."""

from __future__ import annotations

import numpy as np
import pytest

from pinlog import metrics
from pinlog.ai.candidates import map_picks, select_candidates
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.judges.similarity import SimilarityJudge
from pinlog.ai.ports import Pick, Preset, PresetSnapshot
from tests.unit.ai.judges.conftest import make_candidates


def _snapshot(vectors: dict[int, list[float]]) -> PresetSnapshot:
    presets = tuple(Preset(id=i, code=f"C{i}", display_name=str(i), category="ACTIVITY",
                           description="d", examples=("a", "b")) for i in vectors)
    matrix = np.asarray(list(vectors.values()), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return PresetSnapshot(profile="p", presets=presets, matrix=matrix, version=1)


SNAP = _snapshot({1: [1, 0, 0], 2: [0.9, 0.1, 0], 3: [0, 1, 0], 4: [0.5, 0.5, 0.1], 5: [0, 0, 1]})


def test_candidates_sorted_by_cosine_then_top_k_then_floor():
    cands = select_candidates(np.array([2.0, 0, 0]), SNAP, top_k=10, floor=-1.0)
    assert [c.preset.id for c in cands] == [1, 2, 4, 3, 5]
    assert cands[0].similarity == pytest.approx(1.0)
    assert [c.preset.id for c in select_candidates(np.array([1, 0, 0]), SNAP, top_k=2,
                                                   floor=-1.0)] == [1, 2]
    # floor applies after top-K: 4 (≈0.70) is within top-3 but under the floor
    assert [c.preset.id for c in select_candidates(np.array([1, 0, 0]), SNAP, top_k=3,
                                                   floor=0.8)] == [1, 2]
    assert select_candidates(np.array([0, 0, -1.0]), SNAP, top_k=10, floor=0.5) == []


def test_candidates_ties_are_broken_by_preset_id_deterministically():
    snap = _snapshot({7: [1, 0], 3: [1, 0], 5: [0, 1]})
    assert [c.preset.id for c in select_candidates(np.array([1, 0]), snap, top_k=2,
                                                   floor=0.0)] == [3, 7]


def test_candidates_refuse_a_vector_of_another_dimension_or_zero():
    with pytest.raises(PermanentModelError, match="dimensions"):
        select_candidates(np.ones(4), SNAP, top_k=3, floor=0)
    with pytest.raises(PermanentModelError, match="zero"):
        select_candidates(np.zeros(3), SNAP, top_k=3, floor=0)


def test_empty_snapshot_gives_no_candidates():
    empty = PresetSnapshot("p", (), np.zeros((0, 0), np.float32), 0)
    assert select_candidates(np.ones(3), empty, top_k=10, floor=0) == []


def _dropped(reason: str) -> float:
    return metrics.JUDGE_DROPPED_PICKS.labels(reason=reason)._value.get()


def test_map_picks_applies_the_spec_rules_and_counts_drops():
    cands = make_candidates((10, 0.9), (20, 0.8), (30, 0.7))
    nc, bc = _dropped("not_candidate"), _dropped("bad_confidence")
    picks = map_picks([(10, 0.5), (99, 0.9), (10, 0.8), (20, 1.01), (20, -0.2), (30, None),
                       (30, "0.5"), (30, float("nan")), (True, 0.5), (20, 1), (10, 0.6)], cands)
    assert picks == (Pick(10, 0.8), Pick(20, 1.0))
    assert _dropped("not_candidate") - nc == 2  # 99, True
    assert _dropped("bad_confidence") - bc == 5  # 1.01, -0.2, None, "0.5", nan — no clamping


def test_map_picks_accepts_integral_ids_from_json():
    cands = make_candidates((10, 0.9))
    assert map_picks([(10.0, 0.0), ("10", 0.3)], cands) == (Pick(10, 0.3),)
    assert map_picks([], cands) == ()


def test_similarity_judge_uses_floor_margin_and_max_picks():
    cands = make_candidates((1, 0.95), (2, 0.945), (3, 0.94), (4, 0.90))
    judge = SimilarityJudge("p", floor=0.93, margin=0.006, max_picks=3)
    assert [c.preset.id for c in judge.choose(cands)] == [1, 2]  # 3 is outside the margin
    assert [c.preset.id for c in SimilarityJudge("p", floor=0.93, margin=1, max_picks=2)
            .choose(cands)] == [1, 2]  # max_picks
    assert SimilarityJudge("p", floor=0.96, margin=1, max_picks=3).choose(cands) == []
    assert SimilarityJudge("p", floor=0.5, margin=1, max_picks=0).choose(cands) == []


async def test_similarity_judge_answer_is_deterministic_with_confidence_in_range():
    cands = make_candidates((2, 0.91), (1, 0.99), (3, 0.2))
    judge = SimilarityJudge("local-e5-small-q4-384-cosine-v1", floor=0.9, margin=0.1,
                            max_picks=3)
    first = await judge.judge("text", cands)
    assert first == await judge.judge("other text", list(reversed(cands)))
    assert [p.keyword_id for p in first.picks] == [1, 2]
    assert all(0.0 <= p.confidence <= 1.0 for p in first.picks)
    assert first.picks[0].confidence > first.picks[1].confidence >= 0.5
    assert first.model_profile == "similarity-v4:local-e5-small-q4-384-cosine-v1"
    assert first.picks[0].confidence == 0.95  # raw cosine: floor ↦ 0.5, 1.0 ↦ 1.0
    assert (await judge.judge("t", [])).picks == ()


def test_candidates_carry_a_per_note_calibrated_score():
    cands = select_candidates(np.array([1.0, 0.2, 0]), SNAP, top_k=10, floor=-1.0)
    scores = [c.score for c in cands]
    assert all(s is not None for s in scores)
    # z-scores over all presets (hubness-adjusted): they average to 0 over the whole snapshot
    assert sum(scores) == pytest.approx(0.0, abs=1e-5)
    # the score is shift-invariant: it does not depend on the note's cosine level
    from pinlog.ai.candidates import calibrated_scores
    sims = SNAP.matrix @ np.array([1.0, 0.2, 0]) / np.linalg.norm([1.0, 0.2, 0])
    assert calibrated_scores(sims + 0.05, SNAP.matrix) == pytest.approx(
        calibrated_scores(sims, SNAP.matrix))
    assert list(calibrated_scores(np.ones(5), SNAP.matrix - SNAP.matrix + 1)) == [0.0] * 5


def test_similarity_judge_thresholds_the_calibrated_score_not_the_cosine():
    from pinlog.ai.ports import Candidate
    presets = SNAP.presets
    # raw cosines all low and compressed; the calibrated scores decide
    cands = [Candidate(presets[0], 0.81, score=2.5), Candidate(presets[1], 0.83, score=1.2),
             Candidate(presets[2], 0.80, score=2.0), Candidate(presets[3], 0.82, score=0.4)]
    judge = SimilarityJudge("p", floor=1.8, margin=1.5, max_picks=3)
    assert [c.preset.id for c in judge.choose(cands)] == [1, 3]
    # similarity-v4: without a stated cue the calibrated score alone must reach the floor; the
    # margin belongs to the raw-cosine rule only
    assert [c.preset.id for c in SimilarityJudge("p", floor=1.0, margin=0.6, max_picks=3)
            .choose(cands)] == [1, 3, 2]
    confidences = {d.candidate.preset.id: d.confidence for d in judge.decide(cands)}
    assert confidences[1] == 0.675 and confidences[3] == 0.55 and confidences[2] is None


def test_candidates_include_presets_whose_cues_the_note_states():
    presets = tuple(Preset(id=p.id, code=p.code, display_name=p.display_name,
                           category=p.category, description="d", examples=("a", "b"),
                           cues=(("맥주",) if p.id == 5 else ())) for p in SNAP.presets)
    snap = PresetSnapshot("p", presets, SNAP.matrix, 1)
    vector = np.array([2.0, 0, 0])
    assert [c.preset.id for c in select_candidates(vector, snap, top_k=2, floor=-1.0)] == [1, 2]
    with_text = select_candidates(vector, snap, top_k=2, floor=-1.0, text="퇴근하고 맥주")
    assert [c.preset.id for c in with_text] == [1, 2, 5]
    assert with_text[2].score is not None
    # a note that states no cue adds nothing
    assert len(select_candidates(vector, snap, top_k=2, floor=-1.0, text="조용한 곳")) == 2
