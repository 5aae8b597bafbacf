"""The ``similarity`` judge: the offline, deterministic default (SPEC §8).

No external call: it picks among the candidates by calibrated thresholds — an absolute floor
(``judge_floor``) and a margin to the best candidate (``judge_margin``) — at most
``max_picks``. Confidence is the similarity rescaled from ``[judge_floor, 1]`` onto
``[0.5, 1]`` and clipped into ``[0, 1]``, so it is monotone in similarity and comparable
within one profile only.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinlog.ai.candidates import map_picks
from pinlog.ai.ports import Candidate, JudgeAnswer

MODEL_NAME = "similarity-v1"


class SimilarityJudge:
    """Deterministic judge by similarity thresholds (SPEC §8).

    Args:
        profile: embedding profile the thresholds belong to (named in ``model_profile``).
        floor: absolute similarity a pick must reach.
        margin: a pick must satisfy ``similarity >= best - margin``.
        max_picks: most picks returned (best first).
    """

    def __init__(self, profile: str, *, floor: float, margin: float, max_picks: int) -> None:
        self.profile = profile
        self.floor, self.margin, self.max_picks = floor, margin, max_picks
        self.model_profile = f"{MODEL_NAME}:{profile}"

    def confidence(self, similarity: float) -> float:
        """Similarity → confidence in [0, 1] (``floor`` ↦ 0.5, 1.0 ↦ 1.0, clipped)."""
        span = max(1e-6, 1.0 - self.floor)
        return round(min(1.0, max(0.0, 0.5 + 0.5 * (similarity - self.floor) / span)), 3)

    def choose(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates this judge picks, best first (pure, synchronous)."""
        if not candidates or self.max_picks <= 0:
            return []
        ranked = sorted(candidates, key=lambda c: (-c.similarity, c.preset.id))
        best = ranked[0].similarity
        return [c for c in ranked
                if c.similarity >= self.floor and c.similarity >= best - self.margin
                ][: self.max_picks]

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        """Pick among ``candidates`` by similarity; ``text`` is not used (the vector was).

        Returns:
            :class:`JudgeAnswer` with 0..``max_picks`` picks, no unmatched concepts,
            ``model_profile`` ``similarity-v1:<profile>``. Never raises a model error.
        """
        raw = [(c.preset.id, self.confidence(c.similarity)) for c in self.choose(candidates)]
        return JudgeAnswer(picks=map_picks(raw, candidates), unmatched_concepts=(),
                           model_profile=self.model_profile)
