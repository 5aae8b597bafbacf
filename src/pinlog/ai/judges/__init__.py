"""Judges: choose keywords among the candidates only (SPEC §8).

* ``similarity`` (default): offline, deterministic thresholds — :class:`SimilarityJudge`.
* ``llm``: any OpenAI-compatible chat-completions endpoint — :class:`LlmJudge`.
"""

from __future__ import annotations

from typing import Any

from pinlog.ai.calibration import calibration_for
from pinlog.ai.judges.llm import LlmJudge
from pinlog.ai.judges.similarity import SimilarityJudge
from pinlog.ai.ports import EmbeddingProvider, Judge
from pinlog.settings import Settings

__all__ = ["LlmJudge", "SimilarityJudge", "build_judge"]


def build_judge(settings: Settings, provider: EmbeddingProvider, **llm_kwargs: Any) -> Judge:
    """The judge configured by ``PINLOG_JUDGE`` (SPEC §8, §13).

    Args:
        provider: the embedding provider in use; its ``profile`` selects the similarity
            judge's calibration and names it in ``model_profile``.
        llm_kwargs: passed to :meth:`LlmJudge.from_settings` (e.g. ``sleep``, ``client``).

    Raises:
        ValueError: ``llm`` without ``PINLOG_LLM_BASE_URL`` or ``PINLOG_LLM_CHAIN``.
    """
    if settings.judge == "llm":
        return LlmJudge.from_settings(settings, **llm_kwargs)
    calibration = calibration_for(settings)
    return SimilarityJudge(provider.profile, floor=calibration.judge_floor,
                           margin=calibration.judge_margin, max_picks=calibration.max_picks,
                           cue_floor=calibration.judge_cue_floor)
