"""``POST /v1/search`` end to end: core and ai in one process (in-process adapter), fake model
providers at their Protocols, the real database. Contexts are created through the public API,
processed by the real pipeline, then searched (SPEC §10, §11 #3, #19, #20)."""

from __future__ import annotations

import numpy as np
import pytest

from pinlog.ai.errors import TransientModelError
from pinlog.contracts import SearchRequest
from tests.fakes import FakeEmbeddingProvider
from tests.integration.ai.support import DIM, PROFILE, seed_presets
from tests.integration.search.conftest import at_cosine, place_body, running_app, search_settings_for

QUERY_RAIN = "비 오는 날 갈 만한 곳"
RAIN = "비 오는 날 우산 접고 들어간 다방, 빗소리가 좋았다"
WORK = "혼자 노트북 들고 와서 세 시간 작업한 카페"
WINDOW = "창가 자리에서 비 구경하기 좋았음"
NEW = "새로 고친 메모: 주차가 편한 곳"
THEIRS = "비 오는 날 가려고 저장한 곳 (다른 회원)"

#: Texts → cosine with the rain query (e_0), on distinct axes so nothing else lines up.
VECTORS = {
    QUERY_RAIN: at_cosine(1.0),
    RAIN: at_cosine(0.95, axis=2),
    WORK: at_cosine(0.6, axis=1),     # nearest preset: WORK_STUDY (e_1)
    WINDOW: at_cosine(0.7, axis=3),
    NEW: at_cosine(0.1, axis=4),
    THEIRS: at_cosine(1.0),           # another member's note matches the query perfectly
}
#: Keep every hit: the tests look at filtering and re-verification, not at the cuts.
KEEP_ALL = {"search_floor": -1.0, "search_short_query_floor": -1.0, "search_ratio": -1.0}


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(PROFILE, DIM, vectors=VECTORS)


@pytest.fixture
def settings_keep_all(tmp_path, db_url):
    return search_settings_for(tmp_path, db_url, **KEEP_ALL)


async def post_search(app, auth, query: str, **extra):
    return await app.http.post("/v1/search", json={"query": query, **extra}, headers=auth)


async def test_public_search_end_to_end(settings_keep_all, db_url, provider, judge, presets,
                                        sync_conn):
    async with running_app(settings_keep_all, db_url, provider, judge) as app:
        member, auth = await app.member()
        other, other_auth = await app.member()
        r1 = (await app.http.post("/v1/records", json=place_body(1, RAIN, "골목 안 다방"),
                                  headers=auth)).json()
        r2 = (await app.http.post("/v1/records", json=place_body(2, WORK, "창가 작업실"),
                                  headers=auth)).json()
        window = (await app.http.post(f"/v1/records/{r2['recordId']}/contexts",
                                      json={"text": WINDOW}, headers=auth)).json()["contextId"]
        theirs = (await app.http.post("/v1/records", json=place_body(1, THEIRS, "골목 안 다방"),
                                      headers=other_auth)).json()
        await app.settle()

        found = await post_search(app, auth, QUERY_RAIN)
        assert found.status_code == 200
        results = found.json()["results"]
        # one entry per record (#20): record 2 once, with its best context (WINDOW 0.7 > WORK 0.6)
        assert [(r["recordId"], r["contextId"]) for r in results] == [
            (r1["recordId"], r1["contextId"]), (r2["recordId"], window)]
        first = results[0]
        assert set(first) == {"recordId", "contextId", "similarity", "place", "text", "keywords",
                              "matchedBy"}
        assert first["similarity"] == pytest.approx(0.95, abs=1e-5)
        assert results[1]["similarity"] == pytest.approx(0.7, abs=1e-5)
        assert first["text"] == RAIN and results[1]["text"] == WINDOW
        assert first["place"]["name"] == "골목 안 다방"
        assert first["place"]["externalPlaceId"] == "kakao-1"
        assert first["keywords"] == ["With_Friends"]  # owner view of the matched context
        # another member's data never appears (#19), even matching perfectly, even with limit 100
        everything = (await post_search(app, auth, QUERY_RAIN, limit=100)).json()["results"]
        assert theirs["recordId"] not in {r["recordId"] for r in everything}
        assert THEIRS not in str(everything)
        assert [r["recordId"] for r in (await post_search(app, other_auth, QUERY_RAIN, limit=100)
                                        ).json()["results"]] == [theirs["recordId"]]
        # the limit counts records
        assert len((await post_search(app, auth, QUERY_RAIN, limit=1)).json()["results"]) == 1

        calls = provider.calls
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            unauthorized = await post_search(app, headers, QUERY_RAIN)
            assert unauthorized.status_code == 401
        for bad in ({"query": ""}, {"query": "   "}, {"query": QUERY_RAIN, "limit": 0},
                    {"query": QUERY_RAIN, "limit": 101}, {"query": "x" * 501}, {}):
            invalid = await app.http.post("/v1/search", json=bad, headers=auth)
            assert invalid.status_code == 422, bad
        assert provider.calls == calls  # neither 401 nor 422 embedded anything

        # edit: the old context's text never comes back, whatever the query
        old = r1["contextId"]
        edited = await app.http.put(f"/v1/contexts/{old}", json={"text": NEW}, headers=auth)
        new = edited.json()["contextId"]
        await app.settle()
        for query in (QUERY_RAIN, RAIN):
            response = await post_search(app, auth, query, limit=100)
            assert response.status_code == 200
            hits = response.json()["results"]
            assert old not in {h["contextId"] for h in hits}
            assert RAIN not in response.text
            assert (r1["recordId"], new, NEW) in {(h["recordId"], h["contextId"], h["text"])
                                                  for h in hits}
    assert sync_conn.execute("SELECT is_deleted FROM ai.context_embedding WHERE context_id = %s",
                             (old,)).fetchone() == (True,)


async def test_deleted_or_superseded_contexts_never_returned_even_if_ai_rows_stale(
        settings_keep_all, db_url, provider, judge, presets, sync_conn):
    """core re-verifies every hit: with the ai rows put back to COMPLETED / not deleted (as if
    their invalidation had not landed yet), the ai side returns the stale contexts and /v1/search
    still does not."""
    texts = {"deleted": "삭제될 메모", "edited": "고쳐질 메모", "record_gone": "기록째 삭제될 메모",
             "kept_sibling": "남는 메모", "control": "그대로인 메모", "edit_result": "고친 뒤 메모"}
    for i, (key, cosine) in enumerate((("deleted", 0.99), ("edited", 0.98), ("record_gone", 0.97),
                                       ("kept_sibling", 0.3), ("control", 0.5),
                                       ("edit_result", 0.2)), start=1):
        provider.vectors[texts[key]] = np.asarray(at_cosine(cosine, axis=i), dtype=np.float32)
    async with running_app(settings_keep_all, db_url, provider, judge) as app:
        member, auth = await app.member()

        async def create(n: int, text: str) -> tuple[int, int]:
            body = (await app.http.post("/v1/records", json=place_body(n, text), headers=auth)).json()
            return body["recordId"], body["contextId"]

        rec1, deleted = await create(1, texts["deleted"])
        kept_sibling = (await app.http.post(f"/v1/records/{rec1}/contexts",
                                            json={"text": texts["kept_sibling"]},
                                            headers=auth)).json()["contextId"]
        rec2, edited = await create(2, texts["edited"])
        rec3, record_gone = await create(3, texts["record_gone"])
        rec4, control = await create(4, texts["control"])
        await app.settle()

        assert (await app.http.delete(f"/v1/contexts/{deleted}", headers=auth)).status_code == 204
        edit_result = (await app.http.put(f"/v1/contexts/{edited}", json={"text": texts["edit_result"]},
                                          headers=auth)).json()["contextId"]
        assert (await app.http.delete(f"/v1/records/{rec3}", headers=auth)).status_code == 204
        await app.settle()

        stale = [deleted, edited, record_gone]
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED', "
                          "keyword_status = 'COMPLETED' WHERE context_id = ANY(%s)", (stale,))
        sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = false "
                          "WHERE context_id = ANY(%s)", (stale,))

        ai_side = await app.ai.search(SearchRequest(user_id=member, query=QUERY_RAIN, limit=100,
                                                    embedding_profile=PROFILE))
        assert set(stale) <= {h.context_id for h in ai_side.results}  # the test can fail

        response = await post_search(app, auth, QUERY_RAIN, limit=100)
        assert response.status_code == 200
        hits = response.json()["results"]
        returned = {h["contextId"] for h in hits}
        assert returned.isdisjoint(stale)
        assert control in returned and rec3 not in {h["recordId"] for h in hits}
        assert returned <= {kept_sibling, control, edit_result}
        for key in ("deleted", "edited", "record_gone"):
            assert texts[key] not in response.text


async def test_profile_mismatch_between_core_and_ai_is_422_without_model_call(
        tmp_path, db_url, judge, sync_conn):
    # the ai side runs another profile than core's configured one
    seed_presets(sync_conn, profile="fake-profile-v2")
    provider = FakeEmbeddingProvider("fake-profile-v2", DIM, vectors=VECTORS)
    settings = search_settings_for(tmp_path, db_url)
    async with running_app(settings, db_url, provider, judge) as app:
        _, auth = await app.member()
        response = await post_search(app, auth, QUERY_RAIN)
    assert response.status_code == 422
    assert response.json()["error"] == "SEARCH_REJECTED"
    assert provider.calls == 0


async def test_503_when_the_ai_side_cannot_embed_the_query(settings_keep_all, db_url, provider,
                                                           judge, presets):
    async with running_app(settings_keep_all, db_url, provider, judge) as app:
        _, auth = await app.member()
        provider.fail_next(TransientModelError, times=10, message="upstream 503")
        response = await post_search(app, auth, QUERY_RAIN)
    assert response.status_code == 503
    assert response.json()["error"] == "SEARCH_UNAVAILABLE"


async def test_core_without_an_ai_side_answers_503(tmp_path, db_url, provider, judge):
    settings = search_settings_for(tmp_path, db_url)
    async with running_app(settings, db_url, provider, judge, ("core",)) as app:
        _, auth = await app.member()
        response = await post_search(app, auth, QUERY_RAIN)
    assert response.status_code == 503 and provider.calls == 0


async def test_a_one_word_query_keeps_a_hit_between_the_short_query_floor_and_the_floor(
        tmp_path, db_url, judge, presets):
    """SPEC §10 cuts through the whole search path (core → ai search → statement → cuts →
    relevance): one-word queries score lower, so their vector hits are cut at the short-query
    floor (0.5 here), not at the multi-word floor (0.8) — also in the statement's own bound."""
    one_word, two_words = "비오는날", "비오는날 다방"
    note = "우산 접고 들어간 골목 안 찻집"  # none of the queries' words
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={
        one_word: at_cosine(1.0), two_words: at_cosine(1.0), note: at_cosine(0.65, axis=2)})
    settings = search_settings_for(tmp_path, db_url, search_floor=0.8,
                                   search_short_query_floor=0.5, search_ratio=0.0)
    async with running_app(settings, db_url, provider, judge) as app:
        _, auth = await app.member()
        created = (await app.http.post("/v1/records", json=place_body(1, note, "찻집"),
                                       headers=auth)).json()
        await app.settle()
        [hit] = (await post_search(app, auth, one_word)).json()["results"]
        assert (hit["contextId"], hit["matchedBy"]) == (created["contextId"], ["vector"])
        assert hit["similarity"] == pytest.approx(0.65, abs=1e-5)
        assert (await post_search(app, auth, two_words)).json()["results"] == []


@pytest.mark.parametrize("on_this_cpu", [True, False])
async def test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read(
        settings_keep_all, db_url, provider, judge, presets, monkeypatch, on_this_cpu):
    """Issue 28: with the model on this machine's CPU (the bundled one) the query is embedded
    before core's lexical channel starts, so its statement and analysis do not compete with
    the model for the cores; a remote model embeds while the channel reads. Either way the
    query is embedded once per search and the answer is the same."""
    from pinlog.channels.lexical import LexicalChannel as Shared
    from pinlog.core.channels.lexical import LexicalChannel

    provider.on_this_cpu = on_this_cpu
    seen: list[int] = []

    async def find(self, query):
        seen.append(provider.kinds.count("query"))  # query embeddings done when it starts
        return await Shared.find(self, query)

    monkeypatch.setattr(LexicalChannel, "find", find)
    async with running_app(settings_keep_all, db_url, provider, judge) as app:
        _, auth = await app.member()
        created = (await app.http.post("/v1/records", json=place_body(1, RAIN, "골목 안 다방"),
                                       headers=auth)).json()
        await app.settle()
        before = provider.kinds.count("query")
        found = await post_search(app, auth, QUERY_RAIN)
        assert found.status_code == 200
        assert [r["contextId"] for r in found.json()["results"]] == [created["contextId"]]
        assert provider.kinds.count("query") == before + 1  # once, reused by both requests
    assert seen == [before + 1] if on_this_cpu else seen == [before]


async def test_the_searchs_reads_run_without_begin_or_rollback(settings_keep_all, db_url, provider,
                                                                judge, presets):
    """Issue 28: core's lexical read and its re-verification (hits, owner keywords) are single
    reads (each its own snapshot, as under READ COMMITTED), so they run in autocommit — no
    BEGIN/ROLLBACK round trips; the ai side's vector reads keep their REPEATABLE READ snapshot
    (SPEC §9.1)."""
    from sqlalchemy import event

    seen: dict[str, set[bool]] = {}

    def record(conn, cursor, statement, parameters, context, executemany):
        first = statement.lstrip().splitlines()[0]
        for name, marker in (("lexical", "SPEC §10 lexical channel"), ("verify", "a hit survives only"),
                             ("keywords", "SPEC §8 owner view"), ("vector", "exact cosine over one member")):
            if marker in first:
                seen.setdefault(name, set()).add(conn.connection.dbapi_connection.autocommit)

    async with running_app(settings_keep_all, db_url, provider, judge) as app:
        _, auth = await app.member()
        await app.http.post("/v1/records", json=place_body(1, RAIN, "골목 안 다방"), headers=auth)
        await app.settle()
        event.listen(app.core.engine.sync_engine, "before_cursor_execute", record)
        try:
            found = await post_search(app, auth, "비 오는 날 다방")
        finally:
            event.remove(app.core.engine.sync_engine, "before_cursor_execute", record)
        assert found.status_code == 200 and len(found.json()["results"]) == 1
    assert seen == {"lexical": {True}, "verify": {True}, "keywords": {True}, "vector": {False}}
