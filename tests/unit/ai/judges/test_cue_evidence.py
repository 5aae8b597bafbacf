"""Cue evidence of the similarity judge (similarity-v4, SPEC §8): morphology, cue matching,
the pick rules and the evidence recorded for each pick and near miss. Fakes only: hand-made
presets and calibrated scores (the real model's figures are in
tests/integration/ai/presets/test_real_model_keywords.py)."""

from __future__ import annotations

from pinlog.ai.cues import cue_hits, term_matches
from pinlog.ai.judges.similarity import SimilarityJudge
from pinlog.ai.ports import Candidate, Preset
from pinlog.text import content_terms, evidence_terms


def _preset(pid: int, code: str, category: str, cues: tuple[str, ...]) -> Preset:
    return Preset(id=pid, code=code, display_name=code.lower(), category=category,
                  description="d", examples=("e1", "e2"), cues=cues)


FRIENDS = _preset(101, "WITH_FRIENDS", "COMPANION", ("친구", "friend"))
PARTNER = _preset(102, "WITH_PARTNER", "COMPANION", ("여자친구", "남자친구", "girlfriend"))
MEAL = _preset(202, "MEAL", "ACTIVITY", ("밥", "찌개", "돈카츠", "lunch"))
DRINK = _preset(203, "DRINK", "ACTIVITY", ("맥주", "한잔"))
DESSERT = _preset(204, "DESSERT", "ACTIVITY", ("케이크", "디저트", "ice cream"))
WALK = _preset(206, "WALK", "ACTIVITY", ("산책", "걷다", "한 바퀴"))
SPACIOUS = _preset(305, "SPACIOUS", "ATMOSPHERE", ("넓다", "넉넉하다"))
RETRO = _preset(307, "RETRO", "ATMOSPHERE", ("복고", "노포"))
COFFEE = _preset(201, "COFFEE_CHAT", "ACTIVITY", ("수다", "커피 한잔"))


def _judge(**kw) -> SimilarityJudge:
    values = dict(floor=3.5, margin=2.0, max_picks=3, cue_floor=-0.5)
    values.update(kw)
    return SimilarityJudge("p", **values)


def _codes(judge: SimilarityJudge, cands: list[Candidate], text: str) -> list[str]:
    return [c.preset.code for c in judge.choose(cands, text)]


# --- morphology (pinlog.text) ----------------------------------------------------------------
def test_evidence_terms_are_lemmas_with_counters_and_roots():
    assert evidence_terms("부트캠프 친구들과 자주 먹었던 돈카츠 집") == (
        "부트캠프", "친구", "자주", "먹다", "돈카츠", "집")
    assert evidence_terms("커피 한잔하면서") == ("커피", "한", "잔", "하다")
    # 조용했다 (one adjective lemma) and 조용하고 (root + suffix) give the same term
    assert "조용" in evidence_terms("조용했다") and "조용" in evidence_terms("조용하고")
    assert evidence_terms("") == ()


def test_content_terms_keep_their_behaviour_for_search():
    assert content_terms("부트캠프 친구들과 먹었던") == ["부트캠프", "친구", "먹다"]
    assert content_terms("커피 한잔") == ["커피", "잔"]


# --- cue matching (pinlog.ai.cues) ---------------------------------------------------------
def test_cues_match_lemmas_compound_heads_and_english_inflections():
    assert [h.cue for h in cue_hits("점심에 김치찌개 먹음", [MEAL.cues])[0]] == ["찌개"]
    assert [h.cue for h in cue_hits("걸으면서 얘기함", [WALK.cues])[0]] == ["걷다"]
    assert [h.cue for h in cue_hits("met my friends", [FRIENDS.cues])[0]] == ["friend"]
    assert term_matches("김치찌개", "찌개") and not term_matches("사탕", "탕")
    assert not term_matches("friendship", "friend")  # more than three letters longer
    # a multi-word cue matches a contiguous run only
    assert [h.cue for h in cue_hits("공원 한 바퀴 돌았다", [WALK.cues])[0]] == ["한 바퀴"]
    assert cue_hits("한 번 바퀴", [WALK.cues]) == [[]]


def test_the_longest_cue_wins_across_presets():
    hits = cue_hits("여자친구랑 왔다", [FRIENDS.cues, PARTNER.cues])
    assert hits[0] == [] and [h.cue for h in hits[1]] == ["여자친구"]
    # "커피 한잔" (COFFEE_CHAT) covers DRINK's "한잔"
    hits = cue_hits("커피 한잔 하기 좋다", [DRINK.cues, COFFEE.cues])
    assert hits[0] == [] and [h.cue for h in hits[1]] == ["커피 한잔"]
    assert [h.cue for h in cue_hits("맥주 한잔", [DRINK.cues, COFFEE.cues])[0]] == ["맥주", "한잔"]


def test_one_presets_cues_on_the_same_words_count_once():
    rainy = ("비 오다", "비 오는 날", "빗소리")
    hits = cue_hits("비 오는 날 빗소리 들으면서", [rainy, FRIENDS.cues + ("친구들",)])
    assert [h.cue for h in hits[0]] == ["비 오는 날", "빗소리"]
    assert [h.cue for h in cue_hits("친구들이랑", [("친구", "친구들")])[0]] == ["친구"]


def test_a_cue_after_a_facility_word_does_not_count():
    assert cue_hits("주차가 넓어서 차 대기 편했다", [SPACIOUS.cues]) == [[]]
    assert cue_hits("주차 공간 넉넉함", [SPACIOUS.cues]) == [[]]
    assert [h.cue for h in cue_hits("자리가 넓어서 편했다", [SPACIOUS.cues])[0]] == ["넓다"]


# --- the judge -------------------------------------------------------------------------------
def test_a_stated_cue_is_picked_unless_the_score_contradicts_it():
    cands = [Candidate(DRINK, 0.9, score=0.2), Candidate(RETRO, 0.9, score=2.8)]
    assert _codes(_judge(), cands, "퇴근하고 맥주") == ["DRINK"]
    # the score alone (2.8) is below the floor (3.5): RETRO is not picked without a cue
    low = [Candidate(DRINK, 0.9, score=-1.2), Candidate(RETRO, 0.9, score=2.8)]
    assert _codes(_judge(), low, "퇴근하고 맥주") == []
    assert _codes(_judge(cue_floor=-1.5), low, "퇴근하고 맥주") == ["DRINK"]


def test_a_strong_score_alone_picks_but_not_next_to_a_cue_pick_of_its_category():
    # a food note: its dish is a MEAL cue; DESSERT, the nearest other food preset, must not
    # come along on the embedding alone
    cands = [Candidate(DESSERT, 0.93, score=3.9), Candidate(MEAL, 0.92, score=1.0),
             Candidate(RETRO, 0.9, score=0.1)]
    assert _codes(_judge(), cands, "부캠 때 자주 가던 돈카츠 집") == ["MEAL"]
    # without a cue of its category, a strong score alone is enough
    assert _codes(_judge(), cands, "그냥 좋았던 곳") == ["DESSERT"]
    # "a restaurant that was on TV": no cue, no strong score → nothing (not RETRO, not MEAL)
    tv = [Candidate(RETRO, 0.9, score=2.9), Candidate(MEAL, 0.9, score=2.0)]
    assert _codes(_judge(), tv, "무한도전 방영된 맛집") == []


def test_cue_picks_rank_first_and_max_picks_holds():
    cands = [Candidate(p, 0.9, score=s) for p, s in
             ((FRIENDS, 1.0), (MEAL, 0.5), (DRINK, 2.0), (WALK, 0.1), (RETRO, 4.0))]
    text = "친구랑 밥 먹고 맥주 한잔 하고 산책"
    assert _codes(_judge(), cands, text) == ["DRINK", "WITH_FRIENDS", "MEAL"]
    assert _codes(_judge(max_picks=1), cands, text) == ["DRINK"]
    # deterministic, whatever the candidate order
    assert _codes(_judge(), list(reversed(cands)), text) == _codes(_judge(), cands, text)
    assert _codes(_judge(use_cues=False), cands, text) == ["RETRO"]


async def test_the_answer_records_the_evidence_of_picks_and_near_misses():
    cands = [Candidate(FRIENDS, 0.9, score=1.4), Candidate(MEAL, 0.9, score=1.8),
             Candidate(DESSERT, 0.9, score=2.9), Candidate(RETRO, 0.9, score=-1.0),
             Candidate(DRINK, 0.9, score=-0.9)]
    answer = await _judge().judge("부트캠프 친구들과 자주 먹었던 돈카츠 집 맥주", cands)
    assert answer.model_profile == "similarity-v4:p"
    assert {p.keyword_id for p in answer.picks} == {101, 202}
    assert all(0.5 <= p.confidence <= 1.0 for p in answer.picks)
    by_code = {e["code"]: e for e in answer.evidence}
    assert by_code["WITH_FRIENDS"] == {"id": 101, "code": "WITH_FRIENDS", "picked": True,
                                       "score": 1.4, "cues": ["친구"], "reason": "cue",
                                       "confidence": by_code["WITH_FRIENDS"]["confidence"]}
    assert by_code["MEAL"]["cues"] == ["돈카츠"] and by_code["MEAL"]["picked"]
    # near misses: a cue the score contradicts, and the nearest preset below the floor
    assert by_code["DRINK"]["picked"] is False
    assert by_code["DRINK"]["reason"] == "cue below cue floor"
    assert by_code["DRINK"]["cues"] == ["맥주"]
    assert by_code["DESSERT"]["reason"] == "below floor" and by_code["DESSERT"]["cues"] == []
    assert [e["picked"] for e in answer.evidence][:2] == [True, True]


def test_candidates_without_a_score_keep_the_raw_cosine_rule():
    cands = [Candidate(FRIENDS, 0.95), Candidate(MEAL, 0.94), Candidate(DRINK, 0.90)]
    judge = SimilarityJudge("p", floor=0.93, margin=0.02, max_picks=3)
    assert _codes(judge, cands, "맥주") == ["WITH_FRIENDS", "MEAL"]


def test_presets_without_cues_need_no_morphology():
    evidence_terms.cache_clear()
    assert cue_hits("아무 말이나 적은 메모", [(), ()]) == [[], []]
    assert evidence_terms.cache_info().misses == 0
