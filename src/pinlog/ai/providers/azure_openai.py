"""Azure OpenAI embeddings (SPEC §9; issue 23): ``POST {endpoint}/openai/deployments/
{deployment}/embeddings?api-version=…`` with the key in the ``api-key`` header.

The same answers and error classes as :mod:`pinlog.ai.providers.openai` (it is that provider
with Azure's URL, query and header); its default cap is 16 inputs per call (Azure answers 400
"Too many inputs. The max number of inputs is 16" above it on many deployments and API
versions). The body carries ``input`` only: the deployment names the model, and older API
versions refuse arguments they do not know.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

import httpx

from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.providers.openai import OpenAIConfig, OpenAIEmbeddingProvider
from pinlog.ai.registry import given
from pinlog.settings import Settings, reveal

#: The default profile string of this provider's vectors (SPEC §9) — written here only. The
#: default deployment serves text-embedding-3-small, the same vector space as OpenAI's model,
#: but a profile names its provider too: switching between them is a profile change.
PROFILE = "azure-openai-text-embedding-3-small-1536-cosine-v1"

#: The default ``api-version`` (a GA version of the Azure OpenAI data-plane API).
API_VERSION = "2024-10-21"


class AzureOpenAIConfig(OpenAIConfig):
    """``PINLOG_EMBEDDING_PROVIDER=azure-openai``: the ``openai`` provider's fields, read the
    same way, with Azure's meaning and defaults.

    Attributes:
        base_url: ``PINLOG_EMBEDDING_BASE_URL``, the resource endpoint
            (``https://<resource>.openai.azure.com``), required when built.
        model: ``PINLOG_EMBEDDING_MODEL``, the **deployment** name (default
            ``text-embedding-3-small``).
        api_key: ``PINLOG_EMBEDDING_API_KEY``, sent as ``api-key``.
        api_version: ``PINLOG_EMBEDDING_API_VERSION`` (default :data:`API_VERSION`).
        max_inputs: default 16.
    """

    provider: Literal["azure-openai"] = "azure-openai"  # type: ignore[assignment]  # a subclass names itself
    profile: str = PROFILE
    api_version: str = API_VERSION
    max_inputs: int | None = 16

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        return {**super().settings_values(settings),
                **given(api_version=settings.embedding_api_version)}

    def build(self) -> EmbeddingProvider:
        if not self.base_url:
            raise ValueError("PINLOG_EMBEDDING_PROVIDER=azure-openai needs "
                             "PINLOG_EMBEDDING_BASE_URL (https://<resource>.openai.azure.com)")
        return AzureOpenAIEmbeddingProvider(
            base_url=self.base_url, api_key=reveal(self.api_key), model=self.model,
            dimension=self.dimension, profile=self.profile, timeout=self.timeout,
            api_version=self.api_version)


class AzureOpenAIEmbeddingProvider(OpenAIEmbeddingProvider):
    """:class:`OpenAIEmbeddingProvider` with Azure's URL, ``api-version`` and ``api-key``.

    Args:
        base_url: the resource endpoint (``https://<resource>.openai.azure.com``).
        model: the deployment name.
        api_version: the ``api-version`` query parameter.
        (others: as :class:`OpenAIEmbeddingProvider`)
    """

    what = "embedding (azure-openai)"

    def __init__(self, *, base_url: str, api_key: str | None, model: str, dimension: int,
                 profile: str, timeout: float = 60.0, api_version: str = API_VERSION,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.api_version = api_version
        super().__init__(base_url=base_url, api_key=api_key, model=model, dimension=dimension,
                         profile=profile, timeout=timeout, transport=transport)

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"api-key": api_key} if api_key else {}

    def _request(self, texts: list[str]) -> tuple[str, dict[str, str], dict[str, Any]]:
        path = f"openai/deployments/{quote(self.model, safe='')}/embeddings"
        return path, {"api-version": self.api_version}, {"input": texts}
