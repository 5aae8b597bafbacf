"""What every embedding provider's config declares (SPEC §9): a registry member
(:mod:`pinlog.ai.registry`) named by ``PINLOG_EMBEDDING_PROVIDER``.

A provider module defines a subclass with its name (``provider: Literal["…"]``), its profile
string and dimension defaults (written there only), its other fields, and :meth:`build`. Every
field ``x`` is read from ``PINLOG_EMBEDDING_X`` (``Settings.embedding_x``) by
:meth:`settings_values`; a provider with a field of its own overrides it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.registry import Member, given
from pinlog.settings import Settings


class EmbeddingProviderConfig(Member):
    """One embedding provider's configuration.

    Attributes:
        provider: the registry name (discriminator).
        profile: the profile string of its vectors (SPEC §9; ``PINLOG_EMBEDDING_PROFILE``,
            default per provider).
        dimension: vector length (``PINLOG_EMBEDDING_DIMENSION``, default per provider).
        max_inputs: most inputs one call carries (``PINLOG_EMBEDDING_MAX_INPUTS``; None: only
            the micro-batch size bounds it). The micro-batcher lowers it for the process when
            the server refuses a call for carrying too many (issue 23).
        max_concurrent: passage calls the micro-batcher keeps in flight at most (1 for a local
            model; a remote provider reads ``PINLOG_EMBEDDING_MAX_CONCURRENT``); a throttling
            server gets fewer (:class:`pinlog.ai.limits.AdaptiveLimit`).
    """

    provider: str
    profile: str
    dimension: int
    max_inputs: int | None = None
    max_concurrent: int = 1

    settings_prefix: ClassVar[str] = "PINLOG_EMBEDDING_"

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        """``PINLOG_EMBEDDING_PROFILE``, ``PINLOG_EMBEDDING_DIMENSION`` and
        ``PINLOG_EMBEDDING_MAX_INPUTS`` when set."""
        return given(profile=settings.embedding_profile, dimension=settings.embedding_dimension,
                     max_inputs=settings.embedding_max_inputs)

    def build(self) -> EmbeddingProvider:
        """The provider itself (loads a model or opens an HTTP client).

        Raises:
            ValueError: incomplete or contradictory fields (never naming a secret's value).
            RuntimeError / StartupError: an optional dependency is missing.
        """
        raise NotImplementedError
