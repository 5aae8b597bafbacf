"""The ``similarity`` judge: the offline, deterministic default (SPEC §8), "v4" — cues stated
in the note, checked against the calibrated similarity.

No external call. For each candidate the judge has two pieces of evidence:

* ``score``: the per-note calibrated similarity set by
  :func:`pinlog.ai.candidates.select_candidates` (the cosine minus the preset's hubness,
  z-scored over *all* presets of the snapshot for this note; unitless, "standard deviations
  above this note's average preset").
* ``cues``: the preset's cues the note states (:func:`cue_hits`). Cues are words or stems that
  state the preset outright (``cues:`` in the preset file: 맥주, 혼밥, 한 바퀴, "ice cream");
  matched by :func:`pinlog.ai.cues.cue_hits`:
  note and cue are both reduced to lemmas by Korean morphology
  (:func:`pinlog.text.evidence_terms`: 먹었던 → 먹다, 조용했다 → 조용), a cue matches a run of
  the note's lemmas, a noun cue of two or more syllables also matches as the head of a compound
  (찌개 in 김치찌개, 기념일 in 결혼기념일), an English cue of four or more letters also matches
  inflected forms (friend → friends); the longest match wins (여자친구 → WITH_PARTNER, not
  친구 → WITH_FRIENDS); a cue right after a facility word (주차가 넓어서) is about that
  facility, not the place, and does not count.

A candidate is picked when

1. the note states one of its cues and ``score >= cue_floor`` (the embedding does not
   contradict the cue), or
2. no cue, but ``score >= floor`` (a strong embedding match alone) — and no cue-confirmed pick
   of the same category exists: a food note whose dish is a MEAL cue does not also get the
   nearest other food preset (DESSERT) from the embedding alone.

At most ``max_picks``, cue picks first (more cues, then higher score). Measured with
``bench/calibrate_keywords.py`` (numbers in :mod:`pinlog.ai.calibration`): the embedding alone
confused near topics (every food note drifted to DESSERT, "a restaurant that was on TV" to
RETRO) and missed terse notes that state a preset plainly; cues found those, and a trained
logistic head on the embeddings measured no better than the calibrated score (not shipped).

Every judgement explains itself: :meth:`SimilarityJudge.decide` returns one
:class:`Decision` per candidate, and the answer's ``evidence`` (stored in
``ai.context_keyword_analysis.evidence``) lists the picks and the near misses with their score,
cues hit and reason.

A candidate built without a score (``score is None``: hand-made in tests) is judged on its raw
cosine alone with ``floor`` and ``margin`` (the v1 rule), no cues.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pinlog.ai.calibration import Calibration
from pinlog.ai.candidates import map_picks
from pinlog.ai.cues import FACILITY_TERMS, CueHit, cue_hits, cue_terms, term_matches
from pinlog.ai.judges.base import JudgeConfig
from pinlog.ai.ports import Candidate, EmbeddingProvider, Judge, JudgeAnswer, Preset

MODEL_NAME = "similarity-v4"

#: finds the cues of each preset in a note (:func:`pinlog.ai.cues.cue_hits`)
Matcher = Callable[[str, Sequence[Sequence[str]]], list[list[CueHit]]]

#: calibrated-score distance from the floor at which confidence reaches 1.0.
SCORE_SPAN = 2.0

#: default cue floor: a stated cue counts unless the embedding puts the preset clearly below
#: this note's average preset (calibrated score units).
CUE_FLOOR = -0.5

#: near misses recorded in the evidence (besides the picks).
NEAR_MISSES = 5

@dataclass(frozen=True)
class Decision:
    """The judge's view of one candidate: ``score`` (calibrated, or the raw cosine when the
    candidate has no score), the ``cues`` the note states, whether it was ``picked``, the
    ``reason`` (``cue``, ``similarity``, ``cue below cue floor``, ``below floor``,
    ``category has a cue pick``, ``max picks``) and the pick's ``confidence`` (None when not
    picked)."""

    candidate: Candidate
    score: float
    cues: tuple[str, ...]
    picked: bool
    reason: str
    confidence: float | None = None

    def as_evidence(self) -> dict[str, Any]:
        """JSON-able record for ``ai.context_keyword_analysis.evidence``."""
        return {"id": self.candidate.preset.id, "code": self.candidate.preset.code,
                "picked": self.picked, "score": round(self.score, 3),
                "cues": list(self.cues), "reason": self.reason,
                "confidence": self.confidence}


class SimilarityJudgeConfig(JudgeConfig):
    """``PINLOG_JUDGE=similarity`` (the default). Its thresholds are the profile's calibration
    (:mod:`pinlog.ai.calibration`: ``PINLOG_JUDGE_FLOOR``, ``PINLOG_JUDGE_MARGIN``,
    ``PINLOG_JUDGE_CUE_FLOOR``, ``PINLOG_JUDGE_MAX_PICKS`` override it)."""

    judge: Literal["similarity"] = "similarity"

    def build(self, provider: EmbeddingProvider, calibration: Calibration, **kwargs: Any) -> Judge:
        return SimilarityJudge(provider.profile, floor=calibration.judge_floor,
                               margin=calibration.judge_margin, max_picks=calibration.max_picks,
                               cue_floor=calibration.judge_cue_floor)


class SimilarityJudge:
    """Deterministic judge: stated cues checked by the calibrated score, or a strong calibrated
    score alone (SPEC §8). See the module docstring.

    Args:
        profile: embedding profile the thresholds belong to (named in ``model_profile``).
        floor: calibrated score a candidate without a stated cue must reach (for candidates
            without a score: the raw cosine floor).
        margin: only for candidates without a score: a pick's cosine must be within this of
            the best one (v1 rule).
        max_picks: most picks returned.
        cue_floor: calibrated score a candidate with a stated cue must reach.
        use_cues: False → no cue evidence (the embedding alone; for measurements).
        matcher: how cues are found in the note (default :func:`cue_hits`, morphology; the
            bench swaps in a character-bigram matcher to compare).
    """

    def __init__(self, profile: str, *, floor: float, margin: float, max_picks: int,
                 cue_floor: float = CUE_FLOOR, use_cues: bool = True,
                 matcher: Matcher | None = None) -> None:
        self.profile = profile
        self.floor, self.margin, self.max_picks = floor, margin, max_picks
        self.cue_floor = cue_floor
        self.use_cues = use_cues
        self._matcher = matcher or cue_hits
        self.model_profile = f"{MODEL_NAME}:{profile}"

    def _confidence(self, score: float, cues: int) -> float:
        """Cue picks: 0.6 at the cue floor, +0.1 per score unit and per extra cue; score-only
        picks: 0.5 at the floor, 1.0 at ``floor + SCORE_SPAN``. Clipped to [0.5, 1], 3
        decimals; monotone in score and cues, comparable within one profile only."""
        if cues:
            value = 0.6 + 0.1 * (score - self.cue_floor) + 0.1 * (min(cues, 3) - 1)
        else:
            value = 0.5 + 0.5 * (score - self.floor) / SCORE_SPAN
        return round(min(1.0, max(0.5, value)), 3)

    def _raw_decisions(self, candidates: Sequence[Candidate]) -> list[Decision]:
        best = max(c.similarity for c in candidates)
        ranked = sorted(candidates, key=lambda c: (-c.similarity, c.preset.id))
        out, kept = [], 0
        for c in ranked:
            ok = c.similarity >= self.floor and c.similarity >= best - self.margin
            reason = "similarity" if ok else "below floor"
            if ok and kept >= self.max_picks:
                ok, reason = False, "max picks"
            conf = None
            if ok:
                kept += 1
                span = max(1e-6, 1.0 - self.floor)
                conf = round(min(1.0, max(0.0, 0.5 + 0.5 * (c.similarity - self.floor) / span)), 3)
            out.append(Decision(c, c.similarity, (), ok, reason, conf))
        return out

    def decide(self, candidates: Sequence[Candidate], text: str = "") -> list[Decision]:
        """One :class:`Decision` per candidate: the picks first (best first), then the others
        by score. Pure and synchronous.

        Candidates with ``score is None`` (any of them) are judged by the raw-cosine rule.
        """
        if not candidates or self.max_picks <= 0:
            return []
        if any(c.score is None for c in candidates):
            return self._raw_decisions(candidates)
        hits = (self._matcher(text, [c.preset.cues for c in candidates])
                if text and self.use_cues else [[] for _ in candidates])
        cues = [tuple(dict.fromkeys(h.cue for h in hs)) for hs in hits]
        scores = [float(c.score) for c in candidates]  # type: ignore[arg-type]
        by_cue = [i for i in range(len(candidates)) if cues[i] and scores[i] >= self.cue_floor]
        by_cue.sort(key=lambda i: (-len(cues[i]), -scores[i], candidates[i].preset.id))
        cue_categories = {candidates[i].preset.category for i in by_cue}
        by_score = [i for i in range(len(candidates))
                    if not cues[i] and scores[i] >= self.floor]
        by_score.sort(key=lambda i: (-scores[i], candidates[i].preset.id))
        decisions: dict[int, Decision] = {}
        order: list[int] = []
        for i in by_cue + by_score:
            c = candidates[i]
            if not cues[i] and c.preset.category in cue_categories:
                decisions[i] = Decision(c, scores[i], cues[i], False, "category has a cue pick")
                continue
            if len(order) >= self.max_picks:
                decisions[i] = Decision(c, scores[i], cues[i], False, "max picks")
                continue
            order.append(i)
            decisions[i] = Decision(c, scores[i], cues[i], True,
                                    "cue" if cues[i] else "similarity",
                                    self._confidence(scores[i], len(cues[i])))
        for i, c in enumerate(candidates):
            if i not in decisions:
                reason = "cue below cue floor" if cues[i] else "below floor"
                decisions[i] = Decision(c, scores[i], cues[i], False, reason)
        rest = sorted((i for i in decisions if i not in order),
                      key=lambda i: (not cues[i], -scores[i], candidates[i].preset.id))
        return [decisions[i] for i in order + rest]

    def ranked(self, candidates: Sequence[Candidate],
               text: str = "") -> list[tuple[Candidate, float]]:
        """The picked ``(candidate, score)`` pairs, best first."""
        return [(d.candidate, d.score) for d in self.decide(candidates, text) if d.picked]

    def choose(self, candidates: Sequence[Candidate], text: str = "") -> list[Candidate]:
        """The candidates this judge picks, best first (see :meth:`decide`)."""
        return [c for c, _ in self.ranked(candidates, text)]

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        """Pick among ``candidates`` by stated cues and calibrated score (module docstring).

        Returns:
            :class:`JudgeAnswer` with 0..``max_picks`` picks, no unmatched concepts,
            ``model_profile`` ``similarity-v4:<profile>``, and ``evidence``: every pick and up
            to :data:`NEAR_MISSES` near misses (candidates with a stated cue first, then by
            score), each ``{id, code, picked, score, cues, reason, confidence}``. Never raises
            a model error.
        """
        decisions = self.decide(candidates, text)
        picks = [d for d in decisions if d.picked]
        misses = [d for d in decisions if not d.picked][:NEAR_MISSES]
        raw = [(d.candidate.preset.id, d.confidence) for d in picks]
        return JudgeAnswer(picks=map_picks(raw, candidates), unmatched_concepts=(),
                           model_profile=self.model_profile,
                           evidence=tuple(d.as_evidence() for d in picks + misses))


__all__ = ["FACILITY_TERMS", "CueHit", "Decision", "SimilarityJudge", "cue_hits", "cue_terms",
           "preset_cue_terms", "term_matches"]


def preset_cue_terms(preset: Preset) -> tuple[tuple[str, ...], ...]:
    """The lemma sequences of a preset's cues (for inspection and tests)."""
    return tuple(cue_terms(c) for c in preset.cues)
