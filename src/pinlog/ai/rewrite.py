"""Optional query rewrite before embedding (SPEC §10; ``PINLOG_SEARCH_REWRITE=llm``, off by default).

An OpenAI-compatible chat model (``POST {PINLOG_LLM_BASE_URL}/chat/completions``, the judge's
endpoint and key; model ``PINLOG_SEARCH_REWRITE_MODEL`` or the first of ``PINLOG_LLM_CHAIN``)
expands abbreviations and slang of a search query ("피맥" → "피자와 맥주") so the embedding
sees the words the member's notes use. Only the embedded text changes: core's lexical channel
and the relevance decision still see the member's own query.

Never a reason for search to fail: every failure (timeout after
``PINLOG_SEARCH_REWRITE_TIMEOUT`` seconds, connection error, non-200, malformed or unusable
answer) falls back to the original query, logged with the error class only (the query is
personal data and is never logged). The timeout bounds the **whole** call — connect, send and
every read together (SPEC §6; issue 23: an endpoint that sent its headers at once and then a
byte a second used to hold the search until its own deadline answered 503). A throttled
rewrite (429/503) is not waited for: the search goes on with the original query at once.
Successful rewrites are cached in memory (LRU, per process).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx

from pinlog import metrics
from pinlog.settings import LlmEndpoint, Settings

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You rewrite a person's search query over their own saved-place notes (mostly Korean). "
    "Expand abbreviations, slang and shortened words into plain words (e.g. '피맥' -> '피자와 "
    "맥주', '부캠' -> '부트캠프'), keep every other word, add nothing else. Answer with the "
    "rewritten query only, on one line, without quotes or explanations."
)

#: Longest rewrite accepted (characters); a longer answer is not a rewrite of a short query.
MAX_REWRITE_CHARS = 500


class QueryRewriter:
    """Callable ``await rewriter(query) -> str`` (a :data:`pinlog.ai.search.Rewrite`).

    Args:
        endpoint: the OpenAI-compatible chat endpoint (``…/v1``, key, Azure's api-version).
        model: the chat model name.
        timeout: seconds for the whole call (connect, send and every read together).
        cache_size: rewrites kept (least recently used dropped first).
        client: an ``httpx.AsyncClient`` to use (else one is created and owned).
    """

    def __init__(self, endpoint: LlmEndpoint, model: str, timeout: float, *,
                 cache_size: int = 1024, client: httpx.AsyncClient | None = None) -> None:
        self._url = endpoint.chat_url(model)
        self._headers = endpoint.headers()
        self._model = model
        self._timeout = timeout
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cache_size = cache_size
        self._owned = client is None
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout))
        self.calls = 0

    async def __call__(self, query: str) -> str:
        """The rewritten query, or ``query`` itself on any failure. Never raises (except
        cancellation)."""
        if query in self._cache:
            self._cache.move_to_end(query)
            return self._cache[query]
        self.calls += 1
        try:
            async with asyncio.timeout(self._timeout):  # the whole call, not each read
                response = await self._client.post(self._url, headers=self._headers,
                                                   timeout=self._timeout, json=self._body(query))
            if response.status_code != 200:
                if response.status_code in (429, 503):
                    metrics.MODEL_THROTTLED.labels(kind="rewrite").inc()
                log.warning("search rewrite failed", extra={"http_status": response.status_code})
                return query
            rewritten = _answer(response.json())
        except Exception as exc:  # noqa: BLE001 — any failure falls back to the query
            log.warning("search rewrite failed", extra={"error_class": type(exc).__name__})
            return query
        if rewritten is None:
            log.warning("search rewrite failed", extra={"error_class": "unusable answer"})
            return query
        self._cache[query] = rewritten
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return rewritten

    def _body(self, query: str) -> dict[str, Any]:
        return {"model": self._model, "temperature": 0, "max_tokens": 200,
                "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": query}]}

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()


def _answer(payload: Any) -> str | None:
    """The one-line rewrite of a chat-completions body, or None if it is unusable."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, str):
        return None
    text = " ".join(content.split())
    if not text or len(text) > MAX_REWRITE_CHARS or "\x00" in text:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


@dataclass(frozen=True)
class RewriteConfig:
    """``PINLOG_SEARCH_REWRITE`` and what the ``llm`` rewrite calls.

    Attributes:
        endpoint: the LLM endpoint when the rewrite is ``llm`` (the settings refuse an llm
            rewrite without ``PINLOG_LLM_BASE_URL``); None when it is ``off``.
        model: ``PINLOG_SEARCH_REWRITE_MODEL``, else the first of ``PINLOG_LLM_CHAIN``.
        timeout: ``PINLOG_SEARCH_REWRITE_TIMEOUT``, seconds per call.
    """

    endpoint: LlmEndpoint | None
    model: str | None
    timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RewriteConfig:
        return cls(
            endpoint=settings.llm_endpoint() if settings.search_rewrite == "llm" else None,
            model=settings.search_rewrite_model or next(iter(settings.llm_chain), None),
            timeout=settings.search_rewrite_timeout)


def build_rewriter(config: RewriteConfig) -> QueryRewriter | None:
    """The rewriter ``config`` describes (None when ``PINLOG_SEARCH_REWRITE=off``).

    Raises:
        ValueError: ``llm`` without a model (``PINLOG_SEARCH_REWRITE_MODEL`` /
            ``PINLOG_LLM_CHAIN``).
    """
    if config.endpoint is None:
        return None
    if not config.model:
        raise ValueError("PINLOG_SEARCH_REWRITE=llm needs PINLOG_SEARCH_REWRITE_MODEL or "
                         "PINLOG_LLM_CHAIN")
    return QueryRewriter(config.endpoint, config.model, config.timeout)
