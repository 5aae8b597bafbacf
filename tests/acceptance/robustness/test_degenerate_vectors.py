"""Degenerate vectors (zero, near-zero norm, non-finite, wrong dimension) from a provider are a
provider error: never stored, never used as a query (search → 503), and the search SQL never
ranks a NaN (SPEC §6, §9, §10)."""

from __future__ import annotations

import math

import numpy as np
import psycopg
import pytest

from pinlog.ai.errors import DegenerateVectorError
from pinlog.ai.providers.batching import MicroBatcher
from pinlog.ai.vectors import MIN_NORM, check_embeddings
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE, insert_embedding, insert_state, seed_presets
from tests.integration.search.conftest import at_cosine, place_body, running_app, search_settings_for

QUERY = "비 오는 날 갈 만한 곳"
RAIN = "비 오는 날 빗소리 들으며 앉아 있기 좋은 다방"
WORK = "혼자 노트북 들고 와서 작업한 카페"
ZERO = "이 메모는 서버가 영벡터로 돌려준다"
KEEP_ALL = {"search_floor": -1.0, "search_short_query_floor": -1.0, "search_ratio": -1.0}

#: Held-back variants of the same kind: each must be refused, not only the all-zero one.
DEGENERATE = {
    "zero": [0.0] * DIM,
    "near-zero": [1e-9] * DIM,
    "subnormal": [1e-40] + [0.0] * (DIM - 1),
}


def _settings(tmp_path, db_url, fake, **extra):
    return search_settings_for(tmp_path, db_url, embedding_provider="openai",
                               embedding_base_url=fake.base_url, embedding_api_key="sk-test",
                               **KEEP_ALL, **extra)


@pytest.mark.parametrize("kind", sorted(DEGENERATE))
async def test_zero_vector_episode_does_not_poison_the_members_search(
        tmp_path, db_url, sync_conn, fake_openai, kind):
    """A note the server embeds as a degenerate vector ends FAILED (nothing stored), and the
    member's search still ranks the rain note first with a real similarity."""
    fake_openai.vectors.update({QUERY: at_cosine(1.0), RAIN: at_cosine(0.9, axis=2),
                                WORK: at_cosine(0.3, axis=1), ZERO: DEGENERATE[kind]})
    seed_presets(sync_conn)
    settings = _settings(tmp_path, db_url, fake_openai)
    # provider=None: the runtime builds the real OpenAI-compatible provider from the settings
    async with running_app(settings, db_url, None, FakeJudge()) as app:  # type: ignore[arg-type]
        member, auth = await app.member()
        ids = {}
        for n, text in enumerate((ZERO, RAIN, WORK), start=1):
            ids[text] = (await app.http.post("/v1/records", json=place_body(n, text),
                                             headers=auth)).json()["contextId"]
        await app.settle()
        row = sync_conn.execute(
            "SELECT embedding_status, last_error FROM ai.context_ai_state WHERE context_id = %s",
            (ids[ZERO],)).fetchone()
        assert row[0] == "FAILED" and "degenerate" in row[1]
        assert sync_conn.execute("SELECT count(*) FROM ai.context_embedding WHERE context_id = %s",
                                 (ids[ZERO],)).fetchone()[0] == 0
        response = await app.http.post("/v1/search", json={"query": QUERY}, headers=auth)
        assert response.status_code == 200
        results = response.json()["results"]
        assert results[0]["contextId"] == ids[RAIN]
        assert all(r["similarity"] is not None and math.isfinite(r["similarity"]) for r in results)
        assert ids[ZERO] not in {r["contextId"] for r in results}


@pytest.mark.parametrize("kind", sorted(DEGENERATE))
async def test_degenerate_query_vector_is_503_not_an_arbitrary_note(
        tmp_path, db_url, sync_conn, fake_openai, kind):
    fake_openai.vectors.update({RAIN: at_cosine(0.9, axis=2), "zero query": DEGENERATE[kind]})
    seed_presets(sync_conn)
    settings = _settings(tmp_path, db_url, fake_openai)
    async with running_app(settings, db_url, None, FakeJudge()) as app:  # type: ignore[arg-type]
        member, auth = await app.member()
        await app.http.post("/v1/records", json=place_body(1, RAIN), headers=auth)
        await app.settle()
        response = await app.http.post("/v1/search", json={"query": "zero query"}, headers=auth)
        assert response.status_code == 503
        assert "results" not in response.json()


async def test_search_sql_never_ranks_a_stored_zero_vector(tmp_path, db_url, sync_conn, presets):
    """Defence in depth: a zero vector already in the table (written before this fix, or by
    hand) is never compared; the rain note stays first."""
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: at_cosine(1.0)})
    for cid, vector in ((1, [0.0] * DIM), (2, at_cosine(0.9, axis=2)), (3, at_cosine(0.2, axis=3))):
        insert_state(sync_conn, cid, "COMPLETED", "COMPLETED")
        insert_embedding(sync_conn, cid, vector, user_id=5, record_id=cid)
    settings = search_settings_for(tmp_path, db_url, **KEEP_ALL)
    from pinlog.contracts import SearchRequest

    async with running_app(settings, db_url, provider, FakeJudge(), components=("ai",)) as app:
        response = await app.ai.search(SearchRequest(user_id=5, query=QUERY,
                                                     embedding_profile=PROFILE,
                                                     record_ids=[1, 2, 3], mode="vector"))
    assert [h.context_id for h in response.results] == [2, 3]
    assert all(math.isfinite(h.similarity) for h in response.results)
    # the contexts core's lexical channel asks about: the zero vector is not scored either
    assert sorted(h.context_id for h in response.scored) == [2, 3]
    assert all(math.isfinite(h.similarity) for h in response.scored)


async def test_search_sql_skips_a_stored_vector_of_another_length(tmp_path, db_url, sync_conn,
                                                                  presets):
    """Defence in depth for a dimension change under one profile name: no 500."""
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: at_cosine(1.0)})
    insert_state(sync_conn, 1, "COMPLETED", "COMPLETED")
    insert_embedding(sync_conn, 1, at_cosine(0.9, axis=2), user_id=5, record_id=1)
    settings = search_settings_for(tmp_path, db_url, **KEEP_ALL)
    from pinlog.contracts import SearchRequest

    async with running_app(settings, db_url, provider, FakeJudge(), components=("ai",)) as app:
        # written after start-up (e.g. by a replica configured with another dimension)
        insert_state(sync_conn, 2, "COMPLETED", "COMPLETED")
        insert_embedding(sync_conn, 2, [1.0] + [0.0] * 383, user_id=5, record_id=2)
        response = await app.ai.search(SearchRequest(user_id=5, query=QUERY,
                                                     embedding_profile=PROFILE,
                                                     record_ids=[1, 2], mode="vector"))
    assert [h.context_id for h in response.results] == [1]
    assert [h.context_id for h in response.scored] == [1]  # scored: skipped as well


@pytest.mark.parametrize("rows", [
    [[0.0] * 4], [[1e-12] * 4], [[float("nan"), 1, 0, 0]], [[float("inf"), 0, 0, 0]],
    [[1.0, 0, 0]],
])
def test_check_embeddings_refuses_every_degenerate_kind(rows):
    with pytest.raises(DegenerateVectorError):
        check_embeddings(np.array(rows, dtype=np.float64), 1, 4)


def test_check_embeddings_accepts_small_but_real_vectors():
    out = check_embeddings([[MIN_NORM * 2, 0, 0, 0]], 1, 4)
    assert out.shape == (1, 4)


async def test_batcher_fails_only_the_request_with_the_degenerate_row():
    provider = FakeEmbeddingProvider(PROFILE, DIM)
    provider.vectors["bad"] = np.zeros(DIM, dtype=np.float32)  # unit() would make it NaN
    batcher = MicroBatcher(provider, batch_size=8, wait_ms=20)
    import asyncio

    good, bad = await asyncio.gather(batcher.embed(["fine"], "passage"),
                                     batcher.embed(["bad"], "passage"), return_exceptions=True)
    await batcher.aclose()
    assert provider.calls == 1  # one batch, not retried
    assert isinstance(good, np.ndarray) and good.shape == (1, DIM)
    assert isinstance(bad, DegenerateVectorError)


def test_pgvector_refuses_nan_so_only_zero_norms_need_the_sql_guard(sync_conn):
    with pytest.raises(psycopg.errors.DataException):
        sync_conn.execute("SELECT '[NaN,1]'::vector")
