"""Search has priority over background embedding work and a deadline (issue 16 #4): the query
has its own lane in the micro-batcher (and its own provider slot), so it answers while every
background passage call is held; a query that cannot be embedded within PINLOG_SEARCH_TIMEOUT
answers 503 with Retry-After, on time."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from prometheus_client import REGISTRY

from pinlog.contracts import SEARCH_PATH, SECRET_HEADER
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE
from tests.integration.search.conftest import at_cosine, place_body, running_app, search_settings_for

QUERY = "비 오는 날 갈 만한 곳"
RAIN = "비 오는 날 빗소리 들으며 앉아 있기 좋은 다방"
KEEP_ALL = {"search_floor": -1.0, "search_short_query_floor": -1.0, "search_ratio": -1.0}


class HeldPassages(FakeEmbeddingProvider):
    """Passage calls wait on ``passages`` (the backlog); query calls wait on ``queries``."""

    def __init__(self) -> None:
        super().__init__(PROFILE, DIM, vectors={QUERY: at_cosine(1.0), RAIN: at_cosine(0.9, 2)})
        self.passages = asyncio.Event()
        self.queries = asyncio.Event()
        self.queries.set()
        self.passage_entered = asyncio.Event()

    async def embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        if kind == "passage":
            self.passage_entered.set()
            await self.passages.wait()
        else:
            await self.queries.wait()
        return await super().embed(texts, kind)


async def test_search_answers_while_the_background_backlog_is_held(tmp_path, db_url, presets):
    provider = HeldPassages()
    settings = search_settings_for(tmp_path, db_url, search_timeout=5.0, **KEEP_ALL)
    async with running_app(settings, db_url, provider, FakeJudge()) as app:
        member, auth = await app.member()
        provider.passages.set()
        rain = (await app.http.post("/v1/records", json=place_body(1, RAIN), headers=auth)).json()
        await app.settle()
        provider.passages.clear()
        provider.passage_entered.clear()
        for n in range(2, 42):  # the backlog: 40 notes whose embedding calls are all held
            await app.http.post("/v1/records", json=place_body(n, f"긴 메모 {n} " * 100),
                                headers=auth)
        await asyncio.wait_for(provider.passage_entered.wait(), 10)
        assert app.ai.provider.pending("passage") > 0  # more background work is waiting
        response = await asyncio.wait_for(
            app.http.post("/v1/search", json={"query": QUERY}, headers=auth), 5)
        assert response.status_code == 200
        assert response.json()["results"][0]["contextId"] == rain["contextId"]
        provider.passages.set()
        await app.settle()


async def test_search_past_its_deadline_is_503_with_retry_after(tmp_path, db_url, presets):
    """The search deadline alone bounds the answer: PINLOG_SEARCH_TIMEOUT (0.3 s) far below every
    model timeout (60 s: the micro-batcher would give the query call 15 s), and the model never
    answers the query → 503 + Retry-After from the deadline, on both the public and the internal
    route. Told apart from a model timeout by the deadline's own count, not by a clock margin
    (the 30 s guard only turns a missing deadline into a failure instead of a 15 s wait)."""
    provider = HeldPassages()
    provider.queries.clear()  # the model never answers the query
    settings = search_settings_for(tmp_path, db_url, search_timeout=0.3, embedding_timeout=60.0,
                                   llm_timeout=60.0, **KEEP_ALL)
    async with running_app(settings, db_url, provider, FakeJudge()) as app:
        member, auth = await app.member()
        deadlines = timeouts()
        public = await asyncio.wait_for(
            app.http.post("/v1/search", json={"query": QUERY}, headers=auth), 30)
        assert public.status_code == 503 and public.headers["Retry-After"] == "5"
        assert timeouts() == deadlines + 1  # the deadline answered, not a model timeout
        internal = await asyncio.wait_for(app.http.post(
            SEARCH_PATH, headers={SECRET_HEADER: settings.secret_values()[0]},
            json={"userId": member, "query": QUERY, "embeddingProfile": PROFILE}), 30)
        assert internal.status_code == 503 and internal.headers["Retry-After"] == "5"
        assert timeouts() == deadlines + 2
        provider.queries.set()


def timeouts() -> float:
    """``pinlog_search_requests_total{outcome="timeout"}``: searches ended by the deadline."""
    return REGISTRY.get_sample_value("pinlog_search_requests_total", {"outcome": "timeout"}) or 0.0
