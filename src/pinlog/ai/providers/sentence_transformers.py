"""Any sentence-transformers model from a local directory (SPEC §9), an optional extra
(``pip install pinlog-ai[sentence-transformers]``); imported lazily, only when configured.

Input preprocessing is model specific (e5 models want ``passage: `` / ``query: `` prefixes,
most others none): the prefixes are settings (``PINLOG_EMBEDDING_PASSAGE_PREFIX`` /
``PINLOG_EMBEDDING_QUERY_PREFIX``) and the profile string must name them — changing them
requires a new profile and ``pinlog reprocess --profile``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider, EmbedKind
from pinlog.ai.providers.base import EmbeddingProviderConfig
from pinlog.ai.registry import given
from pinlog.settings import Settings

#: The default profile string of this provider's vectors (SPEC §9) — written here only.
PROFILE = "st-all-minilm-l6-v2-384-cosine-v1"


class SentenceTransformersConfig(EmbeddingProviderConfig):
    """``PINLOG_EMBEDDING_PROVIDER=sentence-transformers``: a model from a local directory.

    Attributes:
        model: ``PINLOG_EMBEDDING_MODEL``, the local path (required when built).
        passage_prefix / query_prefix: ``PINLOG_EMBEDDING_PASSAGE_PREFIX`` /
            ``PINLOG_EMBEDDING_QUERY_PREFIX`` (the profile string must name them).
    """

    provider: Literal["sentence-transformers"] = "sentence-transformers"
    profile: str = PROFILE
    dimension: int = 384
    model: str = ""
    passage_prefix: str
    query_prefix: str

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        return {**super().settings_values(settings), **given(model=settings.embedding_model),
                "passage_prefix": settings.embedding_passage_prefix,
                "query_prefix": settings.embedding_query_prefix}

    def build(self) -> EmbeddingProvider:
        return SentenceTransformersProvider(self.model, profile=self.profile,
                                            dimension=self.dimension,
                                            passage_prefix=self.passage_prefix,
                                            query_prefix=self.query_prefix)


class SentenceTransformersProvider:
    """A local sentence-transformers model behind the EmbeddingProvider Protocol.

    Args:
        model_path: local directory of the model (never downloaded here).
        profile: profile string naming model, dimension, distance and prefixes.
        dimension: expected vector length (checked against the model at load).
        passage_prefix / query_prefix: prepended to texts of each kind.

    Raises:
        RuntimeError: sentence-transformers is not installed.
        ValueError: the model's dimension differs from ``dimension``.
    """

    #: the model computes on this process's CPU (:class:`~pinlog.ai.ports.EmbeddingProvider`)
    on_this_cpu = True

    def __init__(self, model_path: str, *, profile: str, dimension: int,
                 passage_prefix: str = "", query_prefix: str = "") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError(
                "PINLOG_EMBEDDING_PROVIDER=sentence-transformers needs the optional extra: "
                "pip install 'pinlog-ai[sentence-transformers]'") from exc
        if not model_path:
            raise ValueError("PINLOG_EMBEDDING_MODEL must be the local path of the model")
        self._model = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        model_dim = self._model.get_sentence_embedding_dimension()
        if model_dim is not None and model_dim != dimension:
            raise ValueError(f"model produces {model_dim}-dimensional vectors, "
                             f"PINLOG_EMBEDDING_DIMENSION is {dimension}")
        self.profile = profile
        self.dimension = dimension
        self._prefix = {"passage": passage_prefix, "query": query_prefix}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="st-model")

    def _run(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=len(texts), normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """Returns ``(len(texts), dimension)`` float32, L2-normalised.

        Raises:
            PermanentModelError: unknown kind or wrong vector length.
        """
        if kind not in self._prefix:
            raise PermanentModelError(f"unknown embedding kind {kind!r}")
        inputs = [self._prefix[kind] + t for t in texts]
        if not inputs:
            return np.zeros((0, self.dimension), dtype=np.float32)
        loop = asyncio.get_running_loop()
        out = np.asarray(await loop.run_in_executor(self._executor, self._run, inputs),
                         dtype=np.float32)
        if out.shape != (len(inputs), self.dimension):
            raise PermanentModelError(f"wrong vector length: expected {self.dimension}, "
                                      f"got {out.shape[-1] if out.ndim else 0}")
        return out

    def close(self) -> None:
        self._executor.shutdown(wait=False)
