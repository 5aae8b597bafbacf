"""Any OpenAI-compatible ``/v1/embeddings`` endpoint (SPEC §9), via httpx: OpenAI, TEI,
vLLM, Ollama (README "Tested providers").

One HTTP call per ``embed`` (the pipeline retries; the micro-batcher coalesces, keeps at most
``max_inputs`` texts per call and adapts the calls in flight). Errors are classified per SPEC §6
by :func:`pinlog.ai.errors.http_error`: timeouts / connection errors / 5xx are transient, 429 and
503 are throttles carrying the server's ``Retry-After``; a refusal for too many inputs is
:class:`~pinlog.ai.errors.TooManyInputs`; other 4xx and 3xx, malformed bodies and vectors of the
wrong length are permanent. Every call is bounded as a whole (``timeout`` seconds for connect,
send and every read together), not per read: a server that trickles its answer still times
out. Of a provider's error body only the structured error type/code is kept (its free text may
echo the input or a key). The API key is never logged.

The request carries ``model``, ``input`` and ``encoding_format: "float"`` only — never
``dimensions`` (Ollama's OpenAI-compatible API does not take it; a profile names the model's
own length, checked on every answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import httpx
import numpy as np
from pydantic import SecretStr

from pinlog.ai.errors import ModelTimeout, PermanentModelError, TransientModelError, http_error
from pinlog.ai.ports import EmbeddingProvider, EmbedKind
from pinlog.ai.providers.base import EmbeddingProviderConfig
from pinlog.ai.registry import given
from pinlog.settings import Settings, reveal

#: The default profile string of this provider's vectors (SPEC §9) — written here only.
PROFILE = "openai-text-embedding-3-small-1536-cosine-v1"


class OpenAIConfig(EmbeddingProviderConfig):
    """``PINLOG_EMBEDDING_PROVIDER=openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

    Attributes:
        model: ``PINLOG_EMBEDDING_MODEL`` (default ``text-embedding-3-small``).
        base_url: ``PINLOG_EMBEDDING_BASE_URL``, required when the provider is built (a
            core-only process only needs the profile).
        api_key: ``PINLOG_EMBEDDING_API_KEY`` (never in a repr or a log).
        timeout: ``PINLOG_EMBEDDING_TIMEOUT``, seconds for a whole HTTP call.
        max_inputs: default 32 (TEI's default ``--max-client-batch-size``; OpenAI takes 2048).
        max_concurrent: default 4 (``PINLOG_EMBEDDING_MAX_CONCURRENT``).
    """

    provider: Literal["openai"] = "openai"
    profile: str = PROFILE
    dimension: int = 1536
    model: str = "text-embedding-3-small"
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout: float
    max_inputs: int | None = 32
    max_concurrent: int = 4

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        return {**super().settings_values(settings),
                **given(model=settings.embedding_model, base_url=settings.embedding_base_url,
                        api_key=settings.embedding_api_key,
                        max_concurrent=settings.embedding_max_concurrent),
                "timeout": settings.embedding_timeout}

    def build(self) -> EmbeddingProvider:
        if not self.base_url:
            raise ValueError("PINLOG_EMBEDDING_PROVIDER=openai needs PINLOG_EMBEDDING_BASE_URL")
        return OpenAIEmbeddingProvider(base_url=self.base_url, api_key=reveal(self.api_key),
                                       model=self.model, dimension=self.dimension,
                                       profile=self.profile, timeout=self.timeout)


class OpenAIEmbeddingProvider:
    """OpenAI-compatible embeddings behind the :class:`~pinlog.ai.ports.EmbeddingProvider` Protocol.

    Args:
        base_url: endpoint root including ``/v1`` (``POST {base_url}/embeddings``).
        api_key: sent as ``Authorization: Bearer …`` when given.
        model: model name sent in the body.
        dimension: vector length every returned row must have.
        profile: profile string of these vectors (must name model, dimension and preprocessing;
            texts are sent as is, no prefixes, for both kinds).
        timeout: seconds for one whole HTTP call (connect, send, every read).
        transport: optional httpx transport (tests).
    """

    #: What a timeout or connection error names the call (subclasses: another server kind).
    what = "embedding"

    def __init__(self, *, base_url: str, api_key: str | None, model: str, dimension: int,
                 profile: str, timeout: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.profile = profile
        self.dimension = dimension
        self.model = model
        self.timeout = timeout
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/") + "/",
                                         headers=self._auth_headers(api_key),
                                         timeout=timeout, transport=transport,
                                         follow_redirects=False)

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer <key>`` (none without a key)."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _request(self, texts: list[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
        """``(path relative to the base URL, query parameters, JSON body)`` of one call."""
        return "embeddings", {}, {"model": self.model, "input": texts,
                                  "encoding_format": "float"}

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """POST the texts; returns ``(len(texts), dimension)`` float32 in input order.

        Raises:
            ModelTimeout: the whole call took longer than ``timeout`` (a trickling answer too).
            TransientModelError: connection/DNS error, HTTP 5xx;
                :class:`~pinlog.ai.errors.ThrottledError` for 429/503 (with ``retry_after``).
            TooManyInputs: the server refused the call for carrying too many inputs.
            PermanentModelError: other 4xx/3xx (an input over the model's context length
                included), malformed body, wrong count or vector length.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        path, params, body = self._request(texts)
        try:
            async with asyncio.timeout(self.timeout):  # the whole call, not each read
                response = await self._client.post(path, params=params, json=body)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise ModelTimeout(f"{self.what} timeout ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise TransientModelError(
                f"{self.what} connection error ({type(exc).__name__})") from None
        if response.status_code != 200:
            # "upstream 429 …": the stage already names itself in last_error
            raise http_error(response.status_code, response.text, response.headers, what="",
                             inputs=len(texts))
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = [item["embedding"] for item in rows]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise PermanentModelError("malformed embedding response") from None
        if len(vectors) != len(texts):
            raise PermanentModelError(
                f"embedding response has {len(vectors)} vectors for {len(texts)} inputs")
        for vector in vectors:
            if not isinstance(vector, list) or len(vector) != self.dimension:
                got = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise PermanentModelError(
                    f"wrong vector length: expected {self.dimension}, got {got}")
        try:
            out = np.asarray(vectors, dtype=np.float32)
        except (ValueError, TypeError):
            raise PermanentModelError("malformed embedding values") from None
        if not np.all(np.isfinite(out)):
            raise PermanentModelError("embedding contains non-finite values")
        return out

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
