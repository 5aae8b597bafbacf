"""The ai side's own lexical evidence and ``/internal/v1/search`` for adopters (SPEC §10 "The
same decision for adopters", issue 28), on the real database with fake model providers.

A reference backend has no lexical channel: it sends process requests (text and ``placeMeta``)
and asks ``POST /internal/v1/search`` (mode ``hybrid``, the default). The ai side stores the
terms of what it received with the embedding (``ai.context_lexical``), reads them only through
the embedding's filters, and answers with the decision core's search makes — the same records
and ``matchedBy`` as ``POST /v1/search`` over the same notes. Filler queries answer nothing on
every path, without a model call.
"""

from __future__ import annotations

import pytest

from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from tests.conftest import TEST_SECRET
from tests.fakes import FakeEmbeddingProvider
from tests.integration.ai.support import DIM, PROFILE, insert_state
from tests.integration.search.conftest import at_cosine, place_body, running_app, search_settings_for

HEADERS = {SECRET_HEADER: TEST_SECRET}
#: only vectors a test places near the query give vector evidence
STRICT_VECTOR = {"search_floor": 0.99, "search_short_query_floor": 0.99, "search_ratio": 0.0}
EGGPLANT = "가지튀김이 미쳤음. 다음엔 부모님이랑"
BUCKWHEAT = "메밀전병이 괜찮았다"
NEAR = "the query itself"  # the fake provider puts this note next to QUERY


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(PROFILE, DIM, vectors={"오늘의 질문": at_cosine(1.0),
                                                        NEAR: at_cosine(0.999, axis=2)})


@pytest.fixture
def settings(tmp_path, db_url):
    return search_settings_for(tmp_path, db_url, **STRICT_VECTOR)


def process(cid: int, text: str, *, user: int = 7, record: int | None = None,
            place: dict | None = None) -> dict:
    return {"contextId": cid, "userId": user, "recordId": record or cid * 10, "text": text,
            "placeMeta": place}


async def backend_processes(app, sync_conn, *requests: dict) -> None:
    """What a reference backend does: a PENDING state row per context, then the process call."""
    for body in requests:
        insert_state(sync_conn, body["contextId"])
        response = await app.http.post(PROCESS_PATH, json=body, headers=HEADERS)
        assert response.status_code == 202, response.text
    await app.settle()


async def internal(app, query: str, *, user: int = 7, **extra) -> list[tuple[int, int, list[str]]]:
    response = await app.http.post(SEARCH_PATH, headers=HEADERS, json={
        "userId": user, "query": query, "embeddingProfile": PROFILE, **extra})
    assert response.status_code == 200, response.text
    return [(h["recordId"], h["contextId"], h.get("matchedBy")) for h in response.json()["results"]]


async def test_internal_search_returns_lexical_only_matches_with_matched_by(
        settings, db_url, provider, judge, presets, sync_conn):
    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        await backend_processes(
            app, sync_conn,
            process(1, EGGPLANT, place={"name": "모던아시안누들서비스", "address": "서울 마포구"}),
            process(2, "소파가 아주 편했다는 소문이 자자한 카페",
                    place={"place_name": "피넛커피 충북혁신도시점"}),
            process(3, NEAR))
        # the note's own word, the place's name (as placeMeta sent it), the meaning
        assert await internal(app, "가지튀김") == [(10, 1, ["text"])]
        assert await internal(app, "피넛커피") == [(20, 2, ["place"])]
        assert await internal(app, "오늘의 질문") == [(30, 3, ["vector"])]
        # the words split differently (bigrams): the same rules as core's lexical channel
        assert await internal(app, "가지 튀김 맛집") == [(10, 1, ["text"])]
        assert await internal(app, "세탁소") == []
        # core's mode (vector evidence only) does not see the words
        assert await internal(app, "가지튀김", mode="vector") == []
    rows = sync_conn.execute("SELECT context_id, user_id, record_id FROM ai.context_lexical "
                             "ORDER BY context_id").fetchall()
    assert rows == [(1, 7, 10), (2, 7, 20), (3, 7, 30)]


async def test_an_edited_or_deleted_notes_old_words_never_match_through_the_ai_side(
        settings, db_url, provider, judge, presets, sync_conn):
    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        await backend_processes(app, sync_conn, process(1, EGGPLANT, record=10),
                                process(3, "트러플감자전 짱맛", record=30))
        assert await internal(app, "가지튀김") == [(10, 1, ["text"])]
        # the backend edits context 1 (a new context 2 for the record; the old one cancelled and
        # its embedding marked deleted) and deletes context 3
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                          "keyword_status = 'CANCELLED' WHERE context_id IN (1, 3)")
        sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id IN (1, 3)")
        await backend_processes(app, sync_conn, process(2, BUCKWHEAT, record=10))
        assert await internal(app, "가지튀김") == [] and await internal(app, "트러플") == []
        assert await internal(app, "메밀전병") == [(10, 2, ["text"])]
        # each invalidation marker alone is enough: only is_deleted …
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED' WHERE context_id = 1")
        assert await internal(app, "가지튀김") == []
        # … or only the status
        sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = false WHERE context_id = 1")
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED' WHERE context_id = 1")
        assert await internal(app, "가지튀김") == []
        # (and with both markers undone the old words would match: the filters are what hides them)
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED' WHERE context_id = 1")
        assert await internal(app, "가지튀김") == [(10, 1, ["text"])]


async def test_the_ai_sides_words_stay_the_members_and_the_profiles(
        tmp_path, db_url, provider, judge, presets, sync_conn):
    settings = search_settings_for(tmp_path, db_url, **STRICT_VECTOR)
    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        await backend_processes(app, sync_conn, process(1, EGGPLANT, user=7),
                                process(2, "가지튀김 또 먹고 싶다", user=8))
        assert await internal(app, "가지튀김", user=7) == [(10, 1, ["text"])]
        assert await internal(app, "가지튀김", user=8) == [(20, 2, ["text"])]
        assert await internal(app, "가지튀김", user=9) == []
        # an embedding of another profile: its words are not read either
        sync_conn.execute("UPDATE ai.context_embedding SET embedding_profile = 'other-v1' WHERE context_id = 1")
        assert await internal(app, "가지튀김", user=7) == []


QUERIES = ["가지튀김", "피넛커피", "오늘의 질문", "돈가스", "맥주 마신 곳", "카페", "세탁소", "ㅎㅎ"]


async def test_core_search_and_the_internal_search_make_the_same_decision(
        settings, db_url, provider, judge, presets):
    """One decision, not two (SPEC §10): over the same notes, ``POST /v1/search`` (core's lexical
    channel over core's rows) and ``POST /internal/v1/search`` (the ai side's over its own) show
    the same records, contexts and matchedBy, in the same order."""
    async with running_app(settings, db_url, provider, judge) as app:
        member, auth = await app.member()
        for n, (text, name) in enumerate([
                (EGGPLANT, "모던아시안누들서비스"), ("소파가 편한 카페", "피넛커피 충북혁신도시점"),
                (NEAR, "골목집"), ("두툼한 돈카츠에 카레 추가", "카츠의 정석"),
                ("친구들이랑 피맥. 페퍼로니 피자", "도우앤홉")], start=1):
            response = await app.http.post("/v1/records", json=place_body(n, text, name), headers=auth)
            assert response.status_code == 201
        extra = await app.http.post(f"/v1/records/{response.json()['recordId']}/contexts",
                                    json={"text": "다음엔 생맥주도"}, headers=auth)
        assert extra.status_code == 201
        await app.settle()
        for query in QUERIES:
            before = provider.calls
            public = await app.http.post("/v1/search", json={"query": query}, headers=auth)
            core = [(h["recordId"], h["contextId"], h["matchedBy"]) for h in public.json()["results"]]
            # core asks twice (vector, then score) and the query is embedded once
            assert provider.calls - before == (0 if query == "ㅎㅎ" else 1), query
            assert core == await internal(app, query, user=member), query
        assert await internal(app, "돈가스", user=member) != []  # not trivially empty


@pytest.mark.parametrize("query", ["ㅎㅎ", "ㅋㅋ", "ㅠㅠ", "?", "..."])
async def test_filler_queries_answer_nothing_on_every_path_without_a_model_call(
        settings, db_url, provider, judge, presets, query):
    async with running_app(settings, db_url, provider, judge) as app:
        _, auth = await app.member()
        await app.http.post("/v1/records", json=place_body(1, "?! ... ㅎㅎ 맛있었음"), headers=auth)
        await app.settle()
        before = provider.calls
        response = await app.http.post("/v1/search", json={"query": query}, headers=auth)
        assert response.status_code == 200 and response.json() == {"results": []}
        for mode in ("hybrid", "vector", "score"):
            assert await internal(app, query, mode=mode, recordIds=[1]) == []
        assert provider.calls == before


async def test_the_ai_lexical_statement_applies_each_filter_alone(
        settings, db_url, engine, provider, judge, presets, sync_conn):
    """The statement itself (``ai/search.sql`` → ``lexical_matches``), below the decision that
    also needs a scored context: a deleted or cancelled embedding's words, another member's and
    another profile's are never read (SPEC §11 #3, #19)."""
    from pinlog.ai.channels import LexicalChannel
    from pinlog.channels import RelevanceRule
    from pinlog.channels.lexical import analyse_query

    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        await backend_processes(app, sync_conn, process(1, EGGPLANT, user=7),
                                process(2, "가지튀김 또 먹고 싶다", user=8))
    channel = LexicalChannel(RelevanceRule(), engine)
    channel.profile = PROFILE

    async def found(user: int = 7) -> list[int]:
        return sorted(c for m in (await channel.matches(user, analyse_query("가지튀김"))).values()
                      for c in m.note_terms)

    assert await found() == [1] and await found(8) == [2] and await found(9) == []
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = 1")
    assert await found() == []                                             # is_deleted alone
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = false WHERE context_id = 1")
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED' WHERE context_id = 1")
    assert await found() == []                                             # the status alone
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED' WHERE context_id = 1")
    sync_conn.execute("UPDATE ai.context_embedding SET embedding_profile = 'other-v1' WHERE context_id = 1")
    assert await found() == []                                             # the profile alone
    sync_conn.execute("UPDATE ai.context_embedding SET embedding_profile = %s, user_id = 8 "
                      "WHERE context_id = 1", (PROFILE,))
    assert await found() == [] and await found(8) == [2]                   # the member, both tables


async def test_the_ai_sides_lexical_read_runs_without_begin_or_rollback(
        settings, db_url, provider, judge, presets, sync_conn):
    """Issue 28: the ai side's lexical read is one statement: autocommit, no BEGIN/ROLLBACK."""
    from sqlalchemy import event

    seen: set[bool] = set()

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().startswith("-- SPEC §10 \"The same decision for adopters\""):
            seen.add(conn.connection.dbapi_connection.autocommit)

    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        await backend_processes(app, sync_conn, process(1, EGGPLANT))
        event.listen(app.ai.engine.sync_engine, "before_cursor_execute", record)
        try:
            assert await internal(app, "가지튀김") == [(10, 1, ["text"])]
        finally:
            event.remove(app.ai.engine.sync_engine, "before_cursor_execute", record)
    assert seen == {True}
