"""Lexical evidence of the similarity judge (similarity-v3, SPEC §8): cues, IDF weighting,
and how it combines with the calibrated score."""

from __future__ import annotations

import pytest

from pinlog.ai.judges.similarity import (
    SimilarityJudge,
    lexical_scores,
    preset_cues,
    text_cues,
)
from pinlog.ai.ports import Candidate, Preset


def _preset(pid: int, name: str, examples: tuple[str, ...], description: str = "d",
            version: int = 1) -> Preset:
    return Preset(id=pid, code=f"C{pid}", display_name=name, category="ACTIVITY",
                  description=description, examples=examples, version=version)


def test_text_cues_are_korean_bigrams_per_token_and_lowercased_english_words():
    assert text_cues("한잔씩") == {"한잔", "잔씩"}
    # one-syllable tokens count as themselves; punctuation splits tokens; no cross-token bigram
    assert text_cues("밥·점심, 맥주!") == {"밥", "점심", "맥주"}
    assert "밥점" not in text_cues("밥 점심")
    assert text_cues("Great BRUNCH a 2차") == {"great", "brunch", "차"}
    assert text_cues("") == frozenset()


def test_preset_cues_use_display_name_and_examples_not_the_description():
    preset = _preset(1, "음주", ("가볍게 맥주 한잔",), description="회식을 포함")
    cues = preset_cues(preset)
    assert {"음주", "맥주", "한잔"} <= cues
    assert "회식" not in cues


def test_lexical_score_weights_cues_by_specificity_across_presets():
    drink = frozenset(text_cues("맥주 한잔"))
    friends = frozenset(text_cues("동네 한잔"))
    other = frozenset(text_cues("케이크"))
    scores = lexical_scores("퇴근하고 맥주 한잔", [drink, friends, other])
    # 맥주 only in drink (idf 1.0); 한잔 shared by two presets (less than 1.0)
    assert scores[0] > scores[1] > 0.0 == scores[2]
    assert scores[0] == pytest.approx(1.0 + scores[1])
    assert 0.0 < scores[1] < 1.0
    # a cue every preset has carries little evidence: log(3/2) / log(3)
    assert lexical_scores("한잔", [drink, friends]) == pytest.approx([0.369, 0.369], abs=1e-3)
    # with a single preset every shared cue counts 1
    assert lexical_scores("맥주 한잔", [drink]) == [2.0]
    assert lexical_scores("", [drink, other]) == [0.0, 0.0]


def test_lexical_evidence_changes_the_pick_and_is_deterministic():
    drink = _preset(1, "음주", ("가볍게 맥주 한잔", "소주 한 병"))
    coffee = _preset(2, "커피", ("커피 마시며 대화",))
    cake = _preset(3, "디저트", ("케이크 먹으러",))
    # the embedding alone prefers cake; the note's words point at coffee
    cands = [Candidate(cake, 0.93, score=2.6), Candidate(coffee, 0.92, score=2.2),
             Candidate(drink, 0.91, score=2.0)]
    judge = SimilarityJudge("p", floor=3.0, margin=0.5, max_picks=3, lexical_weight=1.0)
    text = "아침에 커피 마시며 조용히"
    assert [c.preset.id for c in judge.choose(cands, text)] == [2]
    assert judge.choose(cands, text) == judge.choose(list(reversed(cands)), text)
    # without text (or with weight 0) it is the calibrated score alone
    assert judge.choose(cands) == []
    v2 = SimilarityJudge("p", floor=2.5, margin=0.5, max_picks=3, lexical_weight=0.0)
    assert [c.preset.id for c in v2.choose(cands, text)] == [3]


async def test_judge_answer_uses_the_text_and_names_v3():
    coffee = _preset(2, "커피", ("커피 마시며 대화",))
    cake = _preset(3, "디저트", ("케이크 먹으러",))
    cands = [Candidate(cake, 0.93, score=2.6), Candidate(coffee, 0.92, score=2.2)]
    judge = SimilarityJudge("prof", floor=3.0, margin=0.5, max_picks=3, lexical_weight=1.0)
    answer = await judge.judge("커피 마시며", cands)
    assert [p.keyword_id for p in answer.picks] == [2]
    assert 0.5 <= answer.picks[0].confidence <= 1.0
    assert answer.model_profile == "similarity-v3:prof"
    assert (await judge.judge("아무 말", cands)).picks == ()


def test_cue_cache_follows_preset_version_and_text():
    judge = SimilarityJudge("p", floor=0.0, margin=9.0, max_picks=3, lexical_weight=1.0)
    old = _preset(1, "음주", ("맥주",), version=1)
    new = _preset(1, "음주", ("와인",), version=2)
    other = _preset(2, "x", ("케이크",))
    def value(preset: Preset, text: str) -> float:
        cands = [Candidate(preset, 0.9, score=0.0), Candidate(other, 0.9, score=0.0)]
        return judge.values(cands, text)[0]
    assert value(old, "맥주") == pytest.approx(1.0)
    assert value(new, "맥주") == 0.0 and value(new, "와인") == pytest.approx(1.0)
    # same id and version but other texts (another preset file): not served from the cache
    assert value(_preset(1, "음주", ("소주",)), "소주") == pytest.approx(1.0)
