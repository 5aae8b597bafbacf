"""The ``similarity`` judge: the offline, deterministic default (SPEC §8).

No external call: it picks among the candidates by calibrated similarity thresholds — an
absolute floor (``judge_floor``) and a margin to the best candidate (``judge_margin``) — at most
``max_picks``, best first.

"Calibrated" is per note: :func:`pinlog.ai.candidates.select_candidates` gives every candidate
a ``score`` = its cosine minus the preset's hubness, z-scored over *all* presets of the
snapshot for this note (:func:`pinlog.ai.candidates.calibrated_scores`). Floor and margin apply
to that score (unitless, "standard deviations above this note's average preset"), because raw
e5 cosines are compressed and depend on the note (a long note scores lower against every
preset than a short one; an unrelated note still scores 0.90–0.94). A candidate built without a
score (``score is None``: hand-made in tests) is judged on its raw cosine instead, with the
same floor and margin.

Confidence rises linearly from 0.5 at the floor to 1.0 at ``floor + SCORE_SPAN`` (calibrated
scores) or at cosine 1.0 (raw cosines), clipped into ``[0, 1]``: monotone in the score and
comparable within one profile only.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinlog.ai.candidates import map_picks
from pinlog.ai.ports import Candidate, JudgeAnswer

MODEL_NAME = "similarity-v2"

#: calibrated-score distance from the floor at which confidence reaches 1.0.
SCORE_SPAN = 2.0


def _value(candidate: Candidate) -> float:
    return candidate.score if candidate.score is not None else candidate.similarity


class SimilarityJudge:
    """Deterministic judge by calibrated similarity thresholds (SPEC §8).

    Args:
        profile: embedding profile the thresholds belong to (named in ``model_profile``).
        floor: calibrated score (or raw cosine, for candidates without a score) a pick must
            reach.
        margin: a pick must satisfy ``score >= best score - margin``.
        max_picks: most picks returned (best first).
    """

    def __init__(self, profile: str, *, floor: float, margin: float, max_picks: int) -> None:
        self.profile = profile
        self.floor, self.margin, self.max_picks = floor, margin, max_picks
        self.model_profile = f"{MODEL_NAME}:{profile}"

    def confidence(self, value: float, *, calibrated: bool = False) -> float:
        """Score → confidence in [0, 1].

        ``calibrated``: ``floor`` ↦ 0.5, ``floor + SCORE_SPAN`` ↦ 1.0; otherwise ``value`` is a
        raw cosine: ``floor`` ↦ 0.5, 1.0 ↦ 1.0. Clipped, rounded to 3 decimals.
        """
        top = self.floor + SCORE_SPAN if calibrated else 1.0
        span = max(1e-6, top - self.floor)
        return round(min(1.0, max(0.0, 0.5 + 0.5 * (value - self.floor) / span)), 3)

    def choose(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates this judge picks, best first (pure, synchronous).

        Ranked by calibrated score (raw cosine when a candidate has none), ties by preset id;
        kept when ``value >= floor`` and ``value >= best - margin``; at most ``max_picks``.
        """
        if not candidates or self.max_picks <= 0:
            return []
        ranked = sorted(candidates, key=lambda c: (-_value(c), c.preset.id))
        best = _value(ranked[0])
        return [c for c in ranked
                if _value(c) >= self.floor and _value(c) >= best - self.margin
                ][: self.max_picks]

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        """Pick among ``candidates`` by calibrated score; ``text`` is not used (the vector was).

        Returns:
            :class:`JudgeAnswer` with 0..``max_picks`` picks, no unmatched concepts,
            ``model_profile`` ``similarity-v2:<profile>``. Never raises a model error.
        """
        raw = [(c.preset.id, self.confidence(_value(c), calibrated=c.score is not None))
               for c in self.choose(candidates)]
        return JudgeAnswer(picks=map_picks(raw, candidates), unmatched_concepts=(),
                           model_profile=self.model_profile)
