"""Input caps, Azure OpenAI, throttles and total deadlines of the embedding path (issue 23),
against the local fake_openai server's behaviour profiles (``tests/support/fake_openai.py``, which
cites each real server's documented answers) and httpx's in-memory transport. No database.

* a call never carries more inputs than the cap; a server's refusal (TEI 413, Azure 400)
  lowers the cap for the process and the refused texts still get their own vectors;
* the Azure provider sends ``api-key``, ``api-version`` and the deployment URL;
* a 429/503 reaches the caller as a throttle with the server's wait, and halves the
  micro-batcher's calls in flight;
* a call is bounded as a whole: an answer that trickles in byte by byte still times out.
"""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import numpy as np
import pytest

from pinlog import metrics
from pinlog.ai.errors import ModelTimeout, ThrottledError
from pinlog.ai.providers import build_batched_provider
from pinlog.ai.providers.azure_openai import AzureOpenAIEmbeddingProvider
from pinlog.ai.providers.batching import MicroBatcher
from pinlog.ai.providers.openai import OpenAIEmbeddingProvider
from pinlog.composition import load_config
from tests.support.fake_openai import API_KEY, PROFILES, FakeOpenAI, Profile, vector

TEXTS = [f"preset passage {i} 조용한 카페" for i in range(100)]



def openai_provider(fake_openai: FakeOpenAI, **kwargs) -> OpenAIEmbeddingProvider:
    return OpenAIEmbeddingProvider(base_url=fake_openai.base_url, api_key=fake_openai.api_key, model="m",
                                   dimension=fake_openai.dimension, profile="fake-v1", **kwargs)


def assert_own_vectors(out: np.ndarray, texts: list[str], dimension: int) -> None:
    assert out.shape == (len(texts), dimension)
    for row, text in zip(out, texts, strict=True):
        assert np.allclose(row, vector(text, dimension), atol=1e-6)


@pytest.mark.parametrize("fake_openai", [{"profile": "tei"}], indirect=True)
async def test_a_413_above_teis_batch_size_lowers_the_cap_to_the_servers_maximum(fake_openai):
    """TEI's default --max-client-batch-size is 32: a call of 64 is refused with 413 "batch
    size 64 > maximum allowed batch size 32" (router/src/http/server.rs)."""
    batcher = MicroBatcher(openai_provider(fake_openai), batch_size=64, max_inputs=64, wait_ms=0,
                           max_concurrent=1)
    try:
        out = await batcher.embed(TEXTS, "passage")
        assert_own_vectors(out, TEXTS, fake_openai.dimension)
        assert batcher.max_inputs == 32 and metrics.EMBEDDING_MAX_INPUTS._value.get() == 32
        assert fake_openai.refused["too_many"] == 1  # one refusal, then the cap is known
        assert max(fake_openai.embedding_calls) == 32 and sum(fake_openai.embedding_calls) == len(TEXTS)
        again = await batcher.embed(TEXTS[:40], "passage")  # remembered for the process
        assert_own_vectors(again, TEXTS[:40], fake_openai.dimension)
        assert fake_openai.refused["too_many"] == 1
    finally:
        await batcher.aclose()


GATEWAY_16 = Profile("gateway-16", max_inputs=16, too_many=PROFILES["azure-openai"].too_many)


@pytest.mark.parametrize("fake_openai", [{"profile": GATEWAY_16}], indirect=True)
async def test_a_400_too_many_inputs_halves_a_batch_of_requests_and_none_is_lost(fake_openai):
    """Azure's 400 "Too many inputs. The max number of inputs is 16" (semantic-kernel#2099)
    for a micro-batch of 32 single-text requests: each request still gets its own vector."""
    batcher = MicroBatcher(openai_provider(fake_openai), batch_size=32, max_inputs=32, wait_ms=50,
                           max_concurrent=1)
    try:
        outs = await asyncio.gather(*(batcher.embed([t], "passage") for t in TEXTS[:32]))
        for out, text in zip(outs, TEXTS[:32], strict=True):
            assert_own_vectors(out, [text], fake_openai.dimension)
        assert batcher.max_inputs == 16
        assert fake_openai.refused["too_many"] >= 1 and max(fake_openai.embedding_calls) <= 16
    finally:
        await batcher.aclose()


@pytest.mark.parametrize("fake_openai", [{"profile": "azure-openai", "api_key": API_KEY}], indirect=True)
async def test_azure_openai_gets_api_key_api_version_and_at_most_16_inputs_by_default(fake_openai, tmp_path):
    config = load_config(data_dir=tmp_path, embedding_provider="azure-openai",
                         embedding_base_url=fake_openai.root_url, embedding_api_key=API_KEY,
                         embedding_model="embed-deployment", embedding_dimension=fake_openai.dimension)
    assert config.ai.embedding.max_inputs == 16
    batched = build_batched_provider(config.ai.embedding, config.ai.batching)
    try:
        assert isinstance(batched.provider, AzureOpenAIEmbeddingProvider)
        out = await batched.embed(TEXTS, "passage")
        assert_own_vectors(out, TEXTS, fake_openai.dimension)
        assert fake_openai.refused["too_many"] == 0 and max(fake_openai.embedding_calls) == 16
    finally:
        await batched.aclose()
    wrong = AzureOpenAIEmbeddingProvider(base_url=fake_openai.root_url, api_key="sk-wrong-key-000000",
                                         model="d", dimension=fake_openai.dimension, profile="p")
    with pytest.raises(Exception, match="upstream 401"):
        await wrong.embed(["x"], "passage")
    await wrong.aclose()


async def test_azure_requests_carry_the_deployment_url_and_no_model_field():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["url"], seen["key"] = str(request.url), request.headers.get("api-key")
        seen["auth"] = request.headers.get("authorization")
        import json

        seen["body"] = json.loads(request.content)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    provider = AzureOpenAIEmbeddingProvider(
        base_url="https://res.openai.azure.com", api_key="azure-key-123456", model="emb-dep",
        dimension=2, profile="p", api_version="2024-10-21", transport=httpx.MockTransport(handler))
    await provider.embed(["a"], "passage")
    await provider.aclose()
    assert seen["url"] == ("https://res.openai.azure.com/openai/deployments/emb-dep/embeddings"
                           "?api-version=2024-10-21")
    assert seen["key"] == "azure-key-123456" and seen["auth"] is None
    assert seen["body"] == {"input": ["a"]}


@pytest.mark.parametrize(("headers", "expected"), [
    ({"Retry-After": "5"}, 5.0),
    ({"Retry-After": "DATE+4"}, 4.0),
    ({}, None),
], ids=["seconds", "http-date", "none"])
async def test_a_throttle_reaches_the_caller_with_the_servers_wait(headers, expected):
    if headers.get("Retry-After") == "DATE+4":
        headers = {"Retry-After": email.utils.formatdate(time.time() + 4, usegmt=True)}

    def handler(request):
        return httpx.Response(429, headers=headers, json={"error": {
            "message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})

    provider = OpenAIEmbeddingProvider(base_url="http://x/v1", api_key=None, model="m",
                                       dimension=2, profile="p",
                                       transport=httpx.MockTransport(handler))
    with pytest.raises(ThrottledError) as info:
        await provider.embed(["a"], "passage")
    await provider.aclose()
    if expected is None:
        assert info.value.retry_after is None
    else:
        assert info.value.retry_after == pytest.approx(expected, abs=1.0)


@pytest.mark.parametrize("fake_openai", [{}], indirect=True)
async def test_a_throttle_halves_the_calls_in_flight_and_holds_new_calls(fake_openai):
    batcher = MicroBatcher(openai_provider(fake_openai), batch_size=1, wait_ms=0, max_concurrent=4)
    try:
        assert batcher.limit.allowed == 4
        fake_openai.throttle_next(1, {"retry-after-ms": "100"})
        before = batcher.limit.now()
        with pytest.raises(ThrottledError) as info:
            await batcher.embed(["one"], "passage")
        assert info.value.retry_after == pytest.approx(0.1)
        assert batcher.limit.allowed == 2  # halved
        assert batcher.limit.blocked_until >= before + 0.1  # new calls held for the wait
        out = await batcher.embed(["two"], "passage")  # after the wait, calls go again
        assert_own_vectors(out, ["two"], fake_openai.dimension)
    finally:
        await batcher.aclose()


class Trickle(httpx.AsyncByteStream):
    """A 200 answer whose body arrives one byte every ``interval`` seconds: no single read is
    slow, the whole answer is."""

    def __init__(self, body: bytes, interval: float) -> None:
        self.body, self.interval = body, interval

    async def __aiter__(self):
        for i in range(len(self.body)):
            await asyncio.sleep(self.interval)
            yield self.body[i:i + 1]


async def test_an_answer_that_trickles_in_times_out_as_a_whole():
    body = b'{"data": [{"index": 0, "embedding": [1.0, 0.0]}]}' * 4

    def handler(request):
        return httpx.Response(200, stream=Trickle(body, 0.05))  # ~10 s in all

    provider = OpenAIEmbeddingProvider(base_url="http://x/v1", api_key=None, model="m",
                                       dimension=2, profile="p", timeout=0.3,
                                       transport=httpx.MockTransport(handler))
    started = time.monotonic()
    with pytest.raises(ModelTimeout):
        await provider.embed(["a"], "passage")
    await provider.aclose()
    assert time.monotonic() - started < 5  # the whole call, not each read, was bounded
