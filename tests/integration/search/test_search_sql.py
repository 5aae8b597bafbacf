"""The ai side's personal search on the real PostgreSQL (SPEC §10): the ``search_member`` SQL
and :func:`pinlog.ai.search.search` with a fake provider whose vectors the test controls.

SPEC §11 #3 (each invalidation filter alone is sufficient), #19 (no other member's data),
#20 (one row per record: its best context and that similarity; limit after aggregation).
"""

from __future__ import annotations

import re

import numpy as np
import psycopg
import pytest
from sqlalchemy import TextClause, text

from pinlog.ai.search import NO_CUT, NO_STRENGTH, UNCALIBRATED, ProfileMismatch, SearchCuts, search, to_pgvector
from pinlog.contracts import SearchRequest
from pinlog.db.sql import Queries
from tests.integration.ai.support import PROFILE, insert_embedding, insert_state
from tests.integration.search.conftest import QUERY, at_cosine, place_body, running_app


NO_CUTS = SearchCuts(floor=-1.0, short_query_floor=-1.0, ratio=-1.0)
FILTER_LINE = re.compile(r"--\s*filter:\s*(\S+)\s*$")
OLD_TEXT, NEW_TEXT, OTHER_TEXT = "old note: the query itself", "new note after the edit", "another place"


def search_sql(*, without: tuple[str, ...] = ()) -> TextClause:
    """``search_member`` as shipped, or a test double of it with the named ``-- filter:`` lines
    removed (each filter is on its own line, so removing one leaves valid SQL)."""
    raw = Queries("pinlog.ai", "search.sql").sql("search_member")
    lines = raw.splitlines()
    named = [m.group(1) for line in lines if (m := FILTER_LINE.search(line))]
    assert sorted(named) == ["is_deleted", "member", "profile", "status"], named
    kept = [line for line in lines
            if not ((m := FILTER_LINE.search(line)) and m.group(1) in without)]
    assert len(lines) - len(kept) == len(without), "each filter must be exactly one line"
    return text("\n".join(kept))


async def run_sql(engine, sql: TextClause, user_id: int, *, vector=None, limit: int = 100,
                  profile: str = PROFILE, min_similarity: float = NO_CUT,
                  ) -> list[tuple[int, int, float]]:
    """``(record_id, context_id, similarity)`` rows for the query vector ``e_0``."""
    vector = np.asarray(vector if vector is not None else at_cosine(1.0), dtype=np.float32)
    async with engine.connect() as conn:
        rows = (await conn.execute(sql, {"query_vector": to_pgvector(vector), "user_id": user_id,
                                         "profile": profile, "limit": limit,
                                         "min_similarity": min_similarity,
                                         "min_strength": NO_STRENGTH, **UNCALIBRATED})).all()
    return [(r.record_id, r.context_id, float(r.similarity)) for r in rows]


def seed(conn: psycopg.Connection, context_id: int, record_id: int, cosine: float, *,
         user_id: int = 7, status: str = "COMPLETED", is_deleted: bool = False,
         profile: str = PROFILE, vector: list[float] | None = None) -> None:
    """A state row + an embedding whose cosine with the query is ``cosine``."""
    insert_state(conn, context_id, status, status)
    insert_embedding(conn, context_id, vector or at_cosine(cosine, axis=1 + context_id % 7),
                     profile=profile, user_id=user_id, record_id=record_id, is_deleted=is_deleted)


def request(user_id: int = 7, *, limit: int = 100, query: str = QUERY,
            profile: str = PROFILE) -> SearchRequest:
    return SearchRequest(user_id=user_id, query=query, limit=limit, embedding_profile=profile)


async def test_the_floor_in_the_statement_returns_what_the_cut_after_it_keeps(
        engine, sync_conn):
    """``min_similarity`` (the floor ``apply_cuts`` applies afterwards) only saves work: for
    every floor and limit the statement returns exactly the rows of the uncut statement at or
    above the floor, each record still with its best context."""
    cosines = {1: (10, 0.95), 2: (10, 0.60), 3: (11, 0.88), 4: (12, 0.86), 5: (12, 0.30),
               6: (13, 0.10), 7: (14, 0.87), 8: (14, 0.99)}
    for context_id, (record_id, cosine) in cosines.items():
        seed(sync_conn, context_id, record_id, cosine)
    for floor in (0.0, 0.5, 0.86, 0.87, 0.9, 0.999):
        for limit in (1, 2, 100):
            uncut = await run_sql(engine, search_sql(), 7, limit=100)
            cut = await run_sql(engine, search_sql(), 7, limit=limit, min_similarity=floor)
            expected = [row for row in uncut if row[2] >= floor - 1e-6][:limit]
            assert cut == expected, (floor, limit)
    best = await run_sql(engine, search_sql(), 7, min_similarity=0.9)
    assert [(r, c) for r, c, _ in best] == [(14, 8), (10, 1)]  # record 14 by its best context


# --- SPEC §11 #3 ----------------------------------------------------------------------------

async def test_scenario_03_search_after_edit_each_filter_alone_excludes_the_old_context(
        search_settings, db_url, engine, provider, judge, presets, sync_conn):
    """A real edit through /v1 (old context embedded first), then the search SQL and test
    doubles of it with one or both invalidation filters removed."""
    provider.vectors[OLD_TEXT] = np.asarray(at_cosine(1.0), dtype=np.float32)  # = the query
    provider.vectors[NEW_TEXT] = np.asarray(at_cosine(0.2, axis=2), dtype=np.float32)
    provider.vectors[OTHER_TEXT] = np.asarray(at_cosine(0.5, axis=3), dtype=np.float32)
    async with running_app(search_settings, db_url, provider, judge) as app:
        member, auth = await app.member()
        created = (await app.http.post("/v1/records", json=place_body(1, OLD_TEXT),
                                       headers=auth)).json()
        record, old = created["recordId"], created["contextId"]
        other = (await app.http.post("/v1/records", json=place_body(2, OTHER_TEXT),
                                     headers=auth)).json()
        await app.settle()
        edited = await app.http.put(f"/v1/contexts/{old}", json={"text": NEW_TEXT}, headers=auth)
        assert edited.status_code == 200
        new = edited.json()["contextId"]
        await app.settle()
        via_runtime = await app.ai.search(request(member))

    # precondition: the old context WAS embedded and both invalidation markers are set
    assert sync_conn.execute(
        "SELECT e.is_deleted, s.embedding_status FROM ai.context_embedding e "
        "JOIN ai.context_ai_state s USING (context_id) WHERE context_id = %s", (old,)
    ).fetchone() == (True, "CANCELLED")

    def contexts(rows):
        return {c for _, c, _ in rows}

    expected = {new, other["contextId"]}
    # (a) the query as shipped
    full = await run_sql(engine, search_sql(), member)
    assert contexts(full) == expected
    assert {r for r, _, _ in full} == {record, other["recordId"]}
    # (b) is_deleted filter removed: the status filter alone still excludes it
    assert contexts(await run_sql(engine, search_sql(without=("is_deleted",)), member)) == expected
    # (c) status filter removed: is_deleted alone still excludes it
    assert contexts(await run_sql(engine, search_sql(without=("status",)), member)) == expected
    # (d) both removed: the old context WOULD come back, as the record's best hit (this test can fail)
    unfiltered = await run_sql(engine, search_sql(without=("is_deleted", "status")), member)
    assert unfiltered[0][:2] == (record, old) and unfiltered[0][2] == pytest.approx(1.0, abs=1e-6)
    # the search function and the runtime use the shipped query
    shipped = await search(engine, provider, request(member), NO_CUTS)
    assert {h.context_id for h in shipped.results} == expected
    assert {h.context_id for h in via_runtime.results} <= expected
    assert old not in {h.context_id for h in via_runtime.results}


@pytest.mark.parametrize(("status", "is_deleted"), [
    ("COMPLETED", True),    # is_deleted alone
    ("CANCELLED", False),   # status alone (cancelled, embedding not yet marked)
    ("PROCESSING", False),  # reprocess in flight: old row hidden until the new one is saved
    ("PENDING", False),     # reprocess requested
    ("FAILED", False),
])
async def test_each_invalidation_marker_alone_hides_a_row(engine, provider, sync_conn,
                                                          status, is_deleted):
    seed(sync_conn, 1, 70, 0.5)
    seed(sync_conn, 2, 71, 1.0, status=status, is_deleted=is_deleted)
    response = await search(engine, provider, request(), NO_CUTS)
    assert [(h.record_id, h.context_id) for h in response.results] == [(70, 1)]
    # the row is there and would match best without the two filters
    unfiltered = await run_sql(engine, search_sql(without=("is_deleted", "status")), 7)
    assert unfiltered[0][:2] == (71, 2)


async def test_other_profile_rows_are_never_compared(engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.3)
    # same dimension, other profile, identical to the query
    seed(sync_conn, 2, 71, 1.0, profile="fake-profile-v0")
    # other profile with another dimension (two profiles coexist during a switch, SPEC §2.2)
    seed(sync_conn, 3, 72, 1.0, profile="wide-profile-v9", vector=[1.0] + [0.0] * 15)
    response = await search(engine, provider, request(), NO_CUTS)
    assert [(h.record_id, h.context_id) for h in response.results] == [(70, 1)]
    # the other space's rows are readable by their own profile (the test data is real)
    assert [r for r, _, _ in await run_sql(engine, search_sql(), 7, profile="fake-profile-v0")] == [71]


# --- SPEC §11 #19 ---------------------------------------------------------------------------

async def test_scenario_19_another_members_data_never_appears_even_with_a_large_limit(
        engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.3, user_id=7)
    seed(sync_conn, 2, 71, 0.2, user_id=7)
    for i in range(5):  # member 8's rows match the query perfectly
        seed(sync_conn, 10 + i, 80 + i, 1.0, user_id=8)
    response = await search(engine, provider, request(7, limit=100), NO_CUTS)
    assert [(h.record_id, h.context_id) for h in response.results] == [(70, 1), (71, 2)]
    assert provider.calls == 1 and provider.kinds == ["query"] and provider.texts == [QUERY]
    # the same data is found for its owner: the user filter is what kept it out
    theirs = await search(engine, provider, request(8, limit=100), NO_CUTS)
    assert sorted(h.record_id for h in theirs.results) == [80, 81, 82, 83, 84]
    # a member with no rows gets nothing at all
    assert (await search(engine, provider, request(9, limit=100), NO_CUTS)).results == []


# --- SPEC §11 #20 ---------------------------------------------------------------------------

async def test_scenario_20_record_with_three_matching_contexts_appears_once_with_its_best(
        engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.60)
    seed(sync_conn, 2, 70, 0.95)   # record 70's best context
    seed(sync_conn, 3, 70, 0.80)
    seed(sync_conn, 4, 71, 0.90)
    seed(sync_conn, 5, 72, 0.50)

    everything = (await search(engine, provider, request(limit=100), NO_CUTS)).results
    assert [(h.record_id, h.context_id) for h in everything] == [(70, 2), (71, 4), (72, 5)]
    assert everything[0].similarity == pytest.approx(0.95, abs=1e-5)  # the maximum, not an average
    assert [h.similarity for h in everything] == sorted((h.similarity for h in everything),
                                                        reverse=True)
    # the limit counts records, after the aggregation (record 70's three rows do not fill it)
    top2 = (await search(engine, provider, request(limit=2), NO_CUTS)).results
    assert [(h.record_id, h.context_id) for h in top2] == [(70, 2), (71, 4)]
    top1 = (await search(engine, provider, request(limit=1), NO_CUTS)).results
    assert [(h.record_id, h.context_id) for h in top1] == [(70, 2)]

    # the best context deleted: the record is still there once, with its next best context
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = 2")
    after = (await search(engine, provider, request(limit=100), NO_CUTS)).results
    assert [(h.record_id, h.context_id) for h in after] == [(71, 4), (70, 3), (72, 5)]
    assert after[1].similarity == pytest.approx(0.80, abs=1e-5)


# --- cuts and the profile check --------------------------------------------------------------

async def test_cuts_apply_to_the_top_hit_too_and_cut_the_rest(engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.40)
    seed(sync_conn, 2, 71, 0.38)
    seed(sync_conn, 3, 72, 0.10)
    strict = SearchCuts(floor=0.99, short_query_floor=0.99, ratio=0.99)
    assert (await search(engine, provider, request(), strict)).results == []  # no top-hit rule
    floor = SearchCuts(floor=0.39, short_query_floor=0.39, ratio=0.0)
    assert [h.record_id for h in (await search(engine, provider, request(), floor)).results] == [70]
    ratio = SearchCuts(floor=-1.0, short_query_floor=-1.0, ratio=0.9)   # 0.9 × 0.40 = 0.36
    assert [h.record_id for h in (await search(engine, provider, request(), ratio)).results] == [70, 71]
    raw = await search(engine, provider, request(), strict, apply=False)
    assert [h.record_id for h in raw.results] == [70, 71, 72]


async def test_profile_mismatch_raises_before_any_model_call_or_query(engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.9)
    with pytest.raises(ProfileMismatch) as caught:
        await search(engine, provider, request(profile="openai-text-embedding-3-small-1536-cosine-v1"),
                     NO_CUTS)
    assert caught.value.requested == "openai-text-embedding-3-small-1536-cosine-v1"
    assert caught.value.server == PROFILE
    assert provider.calls == 0


async def test_query_is_embedded_once_whole_as_a_query(engine, provider, sync_conn):
    seed(sync_conn, 1, 70, 0.9)
    long_query = "비 오는 날 부모님이랑 조용히 한식 먹으러 갔던 곳, 주차도 됐던 데"
    await search(engine, provider, request(query=long_query), NO_CUTS)
    assert provider.texts == [long_query] and provider.kinds == ["query"] and provider.batches == [1]


# --- score_records: the lexical channel's records get the same four filters (SPEC §10) -------

@pytest.mark.parametrize("marker", ["status", "is_deleted", "member", "profile"])
async def test_score_records_applies_each_filter_alone(engine, provider, sync_conn, marker):
    """Core asks the ai side to score the records its lexical channel found (``recordIds``):
    a context that any one filter excludes is never scored, whoever asks for its record."""
    seed(sync_conn, 1, 70, 0.5)
    seed(sync_conn, 2, 71, 1.0,
         status="CANCELLED" if marker == "status" else "COMPLETED",
         is_deleted=marker == "is_deleted",
         user_id=8 if marker == "member" else 7,
         profile="fake-profile-v0" if marker == "profile" else PROFILE)
    response = await search(engine, provider, request().model_copy(update={"record_ids": [70, 71]}),
                            NO_CUTS)
    assert [(h.record_id, h.context_id) for h in response.scored] == [(70, 1)]
