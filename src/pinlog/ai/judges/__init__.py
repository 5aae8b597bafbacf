"""Judges: choose keywords among the candidates only (SPEC §8).

* ``similarity`` (default): offline, deterministic thresholds — :class:`SimilarityJudge`.
* ``llm``: any OpenAI-compatible chat-completions endpoint — :class:`LlmJudge`.

Each judge module declares its config model (a :class:`~pinlog.ai.judges.base.JudgeConfig`);
:data:`JUDGES` is the one registry of them, chosen by ``PINLOG_JUDGE``. Adding a judge = one
module + one entry below.
"""

from __future__ import annotations

from typing import Any

from pinlog.ai.calibration import Calibration
from pinlog.ai.judges.base import JudgeConfig
from pinlog.ai.judges.llm import LlmJudge, LlmJudgeConfig
from pinlog.ai.judges.similarity import SimilarityJudge, SimilarityJudgeConfig
from pinlog.ai.ports import EmbeddingProvider, Judge
from pinlog.ai.registry import Registry
from pinlog.settings import Settings

__all__ = ["JUDGES", "JudgeConfig", "LlmJudge", "SimilarityJudge", "build_judge", "judge_config"]

#: The judges, by ``PINLOG_JUDGE`` name.
JUDGES: Registry[JudgeConfig] = Registry(
    "judge", "PINLOG_JUDGE", "judge", (SimilarityJudgeConfig, LlmJudgeConfig))


def judge_config(settings: Settings) -> JudgeConfig:
    """The configured judge's model (``PINLOG_JUDGE`` and the fields it reads).

    Raises:
        SettingsError: an unknown judge name (one line listing the known ones).
    """
    return JUDGES.config(settings.judge, settings)


def build_judge(config: JudgeConfig, provider: EmbeddingProvider, calibration: Calibration,
                **kwargs: Any) -> Judge:
    """The judge ``config`` describes (SPEC §8, §13).

    Args:
        provider: the embedding provider in use; its ``profile`` names the similarity judge's
            answers (``model_profile``).
        calibration: the thresholds in force (the similarity judge's floors and picks).
        kwargs: passed to the llm judge (e.g. ``sleep``, ``client``).

    Raises:
        ValueError: ``llm`` without ``PINLOG_LLM_CHAIN``.
    """
    return config.build(provider, calibration, **kwargs)
