"""What every judge's config declares (SPEC §8): a registry member (:mod:`pinlog.ai.registry`)
named by ``PINLOG_JUDGE``.

A judge module defines a subclass with its name (``judge: Literal["…"]``), its fields, how they
are read from the settings (:meth:`~pinlog.ai.registry.Member.settings_values`) and :meth:`build`.
"""

from __future__ import annotations

from typing import Any

from pinlog.ai.calibration import Calibration
from pinlog.ai.ports import EmbeddingProvider, Judge
from pinlog.ai.registry import Member


class JudgeConfig(Member):
    """One judge's configuration. ``judge`` is the registry name (discriminator)."""

    judge: str

    def build(self, provider: EmbeddingProvider, calibration: Calibration, **kwargs: Any) -> Judge:
        """The judge itself.

        Args:
            provider: the embedding provider in use (its ``profile`` names the judge's answers).
            calibration: the thresholds in force for the configured profile.
            kwargs: test hooks a judge may take (the llm judge's ``sleep``, ``client``);
                ignored by judges without them.

        Raises:
            ValueError: incomplete fields (e.g. the llm judge without a model chain).
        """
        raise NotImplementedError
