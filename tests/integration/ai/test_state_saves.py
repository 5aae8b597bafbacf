"""The statement groups production runs — ``pinlog.ai.state.save_embedding``, ``save_keywords``
and ``start_keyword_and_read`` (one pipelined round trip each) — against the real PostgreSQL,
for every status pair of the guarded stage (SPEC §3, §5.2). The single-statement functions are
checked one by one in ``test_state_guards.py``; here the group as the pipeline sends it: it
commits only when every guard matched, and a failed guard leaves nothing behind.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import text

from pinlog.ai import state
from pinlog.states import Status
from tests.integration.ai.support import (PROFILE, analysis_row, basis, embedding_rows, events,
                                          insert_embedding, insert_state, keyword_rows,
                                          seed_presets, statuses)

ALL = [s.value for s in Status]
SHA = b"\x01" * 32
EXPIRY = timedelta(minutes=10)
#: every (embedding_status, keyword_status) pair
EVERY_PAIR = pytest.mark.parametrize(("embedding", "keyword"), [(e, k) for e in ALL for k in ALL])


async def _saved(engine, save) -> bool:
    """Run ``save(conn)`` in one transaction, committed when it returns True and rolled back
    otherwise — as ``Pipeline._save`` does."""
    async with engine.connect() as conn:
        transaction = await conn.begin()
        saved = await save(conn)
        await (transaction.commit() if saved else transaction.rollback())
    return saved


async def _claim(conn) -> state.Claim:
    """The claim of the job that started row 1's stage (its owner record as inserted,
    ``support.claim_of``); a never-matching one when the row is missing."""
    row = (await conn.execute(text("SELECT owner, owned_at FROM ai.context_ai_state "
                                   "WHERE context_id = 1"))).first()
    if row is None:
        return state.Claim(Status.PROCESSING, None, datetime(2000, 1, 1, tzinfo=UTC))
    return state.Claim(Status.PROCESSING, row[0], row[1])


async def _save_embedding(conn):
    return await state.save_embedding(conn, context_id=1, user_id=7, record_id=70,
                                      vector=np.asarray(basis(0), dtype=np.float32),
                                      profile=PROFILE, text_sha256=SHA, claim=await _claim(conn))


async def _save_embedding_with_terms(conn, note_terms=("가지", "지튀", "튀김"),
                                     place_terms=("모던",)):
    return await state.save_embedding(conn, context_id=1, user_id=7, record_id=70,
                                      vector=np.asarray(basis(0), dtype=np.float32),
                                      profile=PROFILE, text_sha256=SHA, claim=await _claim(conn),
                                      note_terms=list(note_terms), place_terms=list(place_terms))


def lexical_rows(conn, context_id):
    return conn.execute(
        "SELECT user_id, record_id, tsvector_to_array(note_terms), tsvector_to_array(place_terms) "
        "FROM ai.context_lexical WHERE context_id = %s", (context_id,)).fetchall()


async def _save_keywords(conn, picks=((301, 0.9),)):
    return await state.save_keywords(conn, 1, picks=list(picks), preset_version=2,
                                     unmatched_concepts=["야경"], model_profile="judge-m",
                                     evidence=[{"id": 301, "score": 4.5}],
                                     claim=await _claim(conn))


@pytest.mark.parametrize("keyword", ["PENDING", "CANCELLED"])
@pytest.mark.parametrize("embedding", ALL)
async def test_save_embedding_commits_only_while_embedding_is_processing(engine, sync_conn,
                                                                         embedding, keyword):
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    saved = await _saved(engine, _save_embedding)
    assert saved is (embedding == "PROCESSING")
    if saved:
        assert statuses(sync_conn, 1) == ("COMPLETED", keyword)
        assert embedding_rows(sync_conn, 1) == [(PROFILE, False, 8, SHA)]
        assert [e[:4] for e in events(sync_conn, 1)] == [
            ("embedding", "PROCESSING", "COMPLETED", "ai")]
    else:
        assert statuses(sync_conn, 1) == (embedding, keyword)
        assert embedding_rows(sync_conn, 1) == [] and events(sync_conn, 1) == []


@pytest.mark.parametrize("embedding", ALL)
async def test_the_lexical_terms_are_stored_with_the_embedding_only_while_it_is_processing(
        engine, sync_conn, embedding):
    """SPEC §10 (issue 28): the ai side's own lexical evidence is written in the embedding's
    save, under the same guard, and replaced with it."""
    insert_state(sync_conn, 1, embedding=embedding)
    saved = await _saved(engine, _save_embedding_with_terms)
    assert saved is (embedding == "PROCESSING")
    expected = [(7, 70, ["가지", "지튀", "튀김"], ["모던"])] if saved else []
    assert [(u, r, sorted(n), p) for u, r, n, p in lexical_rows(sync_conn, 1)] == \
        [(u, r, sorted(n), p) for u, r, n, p in expected]


async def test_the_lexical_terms_are_replaced_and_never_written_over_a_deleted_embedding(
        engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING")
    assert await _saved(engine, _save_embedding_with_terms)
    # processed again (e.g. reprocess --profile): the row is replaced, not doubled
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PROCESSING' WHERE context_id = 1")
    assert await _saved(engine, lambda conn: _save_embedding_with_terms(conn, ["메밀"], []))
    assert lexical_rows(sync_conn, 1) == [(7, 70, ["메밀"], [])]
    # core marked the embedding deleted meanwhile: neither row is written, the save is discarded
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = 1")
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PROCESSING' WHERE context_id = 1")
    assert await _saved(engine, _save_embedding_with_terms) is False
    assert lexical_rows(sync_conn, 1) == [(7, 70, ["메밀"], [])]


async def test_upsert_lexical_alone_keeps_both_guards(engine, sync_conn):
    """The single-statement form: 0 rows unless PROCESSING, 0 rows over a deleted embedding."""
    insert_state(sync_conn, 1, embedding="COMPLETED")
    async with engine.begin() as conn:
        assert not await state.upsert_lexical(conn, context_id=1, user_id=7, record_id=70,
                                              note_terms=["a1"], place_terms=[],
                                              claim=await _claim(conn))
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PROCESSING' WHERE context_id = 1")
    insert_embedding(sync_conn, 1, basis(3), is_deleted=True)
    async with engine.begin() as conn:
        assert not await state.upsert_lexical(conn, context_id=1, user_id=7, record_id=70,
                                              note_terms=["a1"], place_terms=[],
                                              claim=await _claim(conn))
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = false WHERE context_id = 1")
    async with engine.begin() as conn:
        assert await state.upsert_lexical(conn, context_id=1, user_id=7, record_id=70,
                                          note_terms=["a1"], place_terms=["b2"],
                                          claim=await _claim(conn))
    assert lexical_rows(sync_conn, 1) == [(7, 70, ["a1"], ["b2"])]


async def test_save_embedding_never_revives_a_deleted_row_and_leaves_the_stage(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING")
    insert_embedding(sync_conn, 1, basis(3), profile="old", is_deleted=True)
    assert await _saved(engine, _save_embedding) is False
    assert embedding_rows(sync_conn, 1)[0][:2] == ("old", True)
    assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING") and events(sync_conn, 1) == []


async def test_save_embedding_on_a_missing_row_writes_nothing(engine, sync_conn):
    assert await _saved(engine, _save_embedding) is False
    assert embedding_rows(sync_conn, 1) == [] and statuses(sync_conn, 1) is None


@EVERY_PAIR
async def test_save_keywords_commits_only_from_keyword_processing_with_embedding_completed(
        engine, sync_conn, embedding, keyword):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    sync_conn.execute("INSERT INTO ai.context_keyword VALUES (1, 101, 0.5, 1)")  # an earlier pick
    saved = await _saved(engine, _save_keywords)
    expected = embedding == "COMPLETED" and keyword == "PROCESSING"
    assert saved is expected
    got = [(k, float(c), v) for k, c, v in keyword_rows(sync_conn, 1)]
    if expected:
        assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
        assert got == [(301, 0.9, 2)]  # delete + insert: the earlier pick is gone
        assert analysis_row(sync_conn, 1) == (2, ["야경"], "judge-m")
        assert [e[:4] for e in events(sync_conn, 1)] == [
            ("keyword", "PROCESSING", "COMPLETED", "ai")]
    else:  # rolled back: the earlier pick stays, no analysis row, no event
        assert statuses(sync_conn, 1) == (embedding, keyword)
        assert got == [(101, 0.5, 1)]
        assert analysis_row(sync_conn, 1) is None and events(sync_conn, 1) == []


async def test_save_keywords_with_no_pick_clears_the_rows_and_completes(engine, sync_conn):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding="COMPLETED", keyword="PROCESSING")
    sync_conn.execute("INSERT INTO ai.context_keyword VALUES (1, 101, 0.5, 1)")
    assert await _saved(engine, lambda conn: _save_keywords(conn, picks=())) is True
    assert keyword_rows(sync_conn, 1) == []
    assert analysis_row(sync_conn, 1) == (2, ["야경"], "judge-m")
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")


@EVERY_PAIR
async def test_start_keyword_and_read_starts_only_pending_behind_a_completed_embedding(
        engine, sync_conn, embedding, keyword):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    insert_embedding(sync_conn, 1, basis(2), text="노트")
    async with engine.connect() as conn:
        expected_fingerprint = await state.preset_fingerprint(conn, PROFILE)
        await conn.commit()
    async with engine.begin() as conn:
        claim, stored, fingerprint = await state.start_keyword_and_read(conn, 1, EXPIRY,
                                                                        PROFILE)
    started = embedding == "COMPLETED" and keyword == "PENDING"
    assert (claim.previous if claim else None) is (Status.PENDING if started else None)
    assert statuses(sync_conn, 1) == (embedding, "PROCESSING" if started else keyword)
    assert [e[:3] for e in events(sync_conn, 1)] == (
        [("keyword", "PENDING", "PROCESSING")] if started else [])
    # the reads change nothing and answer whether or not the start matched
    assert stored is not None and stored.profile == PROFILE
    assert np.allclose(stored.vector, basis(2))
    assert fingerprint == expected_fingerprint


async def test_start_keyword_and_read_reclaims_an_expired_keyword_stage(engine, sync_conn):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding="COMPLETED", keyword="PROCESSING",
                 age_seconds=EXPIRY.total_seconds() + 5)
    async with engine.begin() as conn:
        claim, stored, _ = await state.start_keyword_and_read(conn, 1, EXPIRY, PROFILE)
    assert claim is not None and claim.previous is Status.PROCESSING
    assert stored is None  # no vector stored
    assert events(sync_conn, 1)[-1][1:3] == ("PROCESSING", "PROCESSING")
