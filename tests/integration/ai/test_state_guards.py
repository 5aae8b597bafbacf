"""Every guarded statement of ``pinlog.ai.state`` against the real PostgreSQL (SPEC §3).

Each test starts the row in a given status (plain SQL, as core or an earlier job left it) and
checks which statuses the guard lets through — the precondition lives in SQL, so these tests
would fail if a guard were weakened.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from pinlog.ai import state
from pinlog.states import Stage, Status
from tests.integration.ai.support import (basis, claim_of, embedding_rows, events,
                                          insert_embedding, insert_state, keyword_rows,
                                          read_state, seed_presets, statuses)
from tests.sqltext import sql_code

EXPIRY = timedelta(minutes=10)
ALL = [s.value for s in Status]


async def _start(engine, cid, stage):
    """The guarded start's previous status (None: 0 rows)."""
    async with engine.begin() as conn:
        claim = await state.start_stage(conn, cid, stage, EXPIRY)
    return claim.previous if claim is not None else None


@pytest.mark.parametrize("status", ALL)
async def test_embedding_start_only_from_pending(engine, sync_conn, status):
    insert_state(sync_conn, 1, embedding=status)
    previous = await _start(engine, 1, Stage.EMBEDDING)
    if status == "PENDING":
        assert previous is Status.PENDING
        assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING")
        assert events(sync_conn, 1) == [("embedding", "PENDING", "PROCESSING", "ai", "started")]
    else:  # a live PROCESSING, COMPLETED, FAILED and CANCELLED never start
        assert previous is None
        assert statuses(sync_conn, 1) == (status, "PENDING")
        assert events(sync_conn, 1) == []


async def test_start_reclaims_expired_processing_and_returns_previous_status(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING", age_seconds=EXPIRY.total_seconds() + 5)
    before = read_state(sync_conn, 1).updated_at
    assert await _start(engine, 1, Stage.EMBEDDING) is Status.PROCESSING
    row = read_state(sync_conn, 1)
    assert row.embedding_status == "PROCESSING" and row.updated_at > before
    assert events(sync_conn, 1)[-1][1:3] == ("PROCESSING", "PROCESSING")
    assert "reclaimed" in events(sync_conn, 1)[-1][4]
    # re-claimed just now: a second start is refused
    assert await _start(engine, 1, Stage.EMBEDDING) is None


async def test_reclaim_measures_updated_at_alone_not_rescanned_at(engine, sync_conn):
    """SPEC §7.3: a recent rescanned_at must not prevent the ai re-claim of a stale stage."""
    insert_state(sync_conn, 1, embedding="PROCESSING", age_seconds=EXPIRY.total_seconds() + 5)
    sync_conn.execute("UPDATE ai.context_ai_state SET rescanned_at = now(), retry_count = 1")
    assert await _start(engine, 1, Stage.EMBEDDING) is Status.PROCESSING


async def test_processing_younger_than_expiry_is_not_reclaimed(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING", age_seconds=EXPIRY.total_seconds() - 30)
    assert await _start(engine, 1, Stage.EMBEDDING) is None


@pytest.mark.parametrize("embedding", ALL)
@pytest.mark.parametrize("keyword", ["PENDING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED"])
async def test_keyword_start_needs_pending_and_embedding_completed(engine, sync_conn, embedding,
                                                                   keyword):
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    previous = await _start(engine, 1, Stage.KEYWORD)
    if embedding == "COMPLETED" and keyword == "PENDING":
        assert previous is Status.PENDING
        assert statuses(sync_conn, 1) == ("COMPLETED", "PROCESSING")
    else:
        assert previous is None
        assert statuses(sync_conn, 1) == (embedding, keyword)


async def test_keyword_reclaim_also_needs_embedding_completed(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="CANCELLED", keyword="PROCESSING", age_seconds=3600)
    assert await _start(engine, 1, Stage.KEYWORD) is None
    insert_state(sync_conn, 2, embedding="COMPLETED", keyword="PROCESSING", age_seconds=3600)
    assert await _start(engine, 2, Stage.KEYWORD) is Status.PROCESSING


async def test_start_on_missing_row_is_zero_rows(engine):
    assert await _start(engine, 999, Stage.EMBEDDING) is None
    assert await _start(engine, 999, Stage.KEYWORD) is None


@pytest.mark.parametrize("status", ALL)
async def test_complete_embedding_only_from_processing(engine, sync_conn, status):
    insert_state(sync_conn, 1, embedding=status)
    async with engine.begin() as conn:
        done = await state.complete_stage(conn, 1, Stage.EMBEDDING, claim_of(sync_conn, 1))
    assert done is (status == "PROCESSING")
    assert statuses(sync_conn, 1)[0] == ("COMPLETED" if status == "PROCESSING" else status)


@pytest.mark.parametrize("embedding", ALL)
@pytest.mark.parametrize("keyword", ALL)
async def test_complete_keyword_only_from_processing_with_embedding_completed(
        engine, sync_conn, embedding, keyword):
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    async with engine.begin() as conn:
        done = await state.complete_stage(conn, 1, Stage.KEYWORD, claim_of(sync_conn, 1))
    expected = embedding == "COMPLETED" and keyword == "PROCESSING"
    assert done is expected
    assert statuses(sync_conn, 1) == (embedding, "COMPLETED" if expected else keyword)


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("status", ALL)
async def test_fail_only_from_processing_never_overwrites_cancelled(engine, sync_conn, stage,
                                                                    status):
    insert_state(sync_conn, 1, **{stage.label: status})
    async with engine.begin() as conn:
        failed = await state.fail_stage(conn, 1, stage, "embedding permanent: upstream 400",
                                        claim_of(sync_conn, 1))
    row = read_state(sync_conn, 1)
    got = row.embedding_status if stage is Stage.EMBEDDING else row.keyword_status
    if status == "PROCESSING":
        assert failed and got == "FAILED"
        assert row.last_error == "embedding permanent: upstream 400"
        assert events(sync_conn, 1) == [(stage.label, "PROCESSING", "FAILED", "ai",
                                         "embedding permanent: upstream 400")]
    else:
        assert not failed and got == status and row.last_error is None
        assert events(sync_conn, 1) == []


async def test_record_error_never_touches_updated_at_and_only_while_processing(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING", age_seconds=60)
    insert_state(sync_conn, 2, embedding="CANCELLED", age_seconds=60)
    before = read_state(sync_conn, 1).updated_at
    async with engine.begin() as conn:
        assert await state.record_error(conn, 1, Stage.EMBEDDING,
                                        "embedding transient: upstream 503", claim_of(sync_conn, 1))
        assert not await state.record_error(conn, 2, Stage.EMBEDDING, "x", claim_of(sync_conn, 2))
    row = read_state(sync_conn, 1)
    assert row.updated_at == before
    assert row.embedding_status == "PROCESSING"
    assert row.last_error == "embedding transient: upstream 503" and row.last_error_at is not None
    assert events(sync_conn, 1) == [("embedding", None, None, "ai",
                                     "embedding transient: upstream 503")]
    assert read_state(sync_conn, 2).last_error is None and events(sync_conn, 2) == []


async def test_record_error_is_cut_to_500_characters(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING")
    async with engine.begin() as conn:
        await state.record_error(conn, 1, Stage.EMBEDDING,
                                 state.format_error(Stage.EMBEDDING, "transient", "x" * 900),
                                 claim_of(sync_conn, 1))
    assert len(read_state(sync_conn, 1).last_error) == 500


async def _upsert(engine, sync_conn, cid, vector, sha=b"\x01" * 32):
    claim = claim_of(sync_conn, cid)
    async with engine.begin() as conn:
        await state.lock_state(conn, cid)
        return await state.upsert_embedding(conn, context_id=cid, user_id=1, record_id=2,
                                            vector=np.asarray(vector, dtype=np.float32),
                                            profile="p", text_sha256=sha, claim=claim)


@pytest.mark.parametrize("status", ALL)
async def test_embedding_upsert_only_while_processing(engine, sync_conn, status):
    insert_state(sync_conn, 1, embedding=status)
    assert await _upsert(engine, sync_conn, 1, basis(0)) is (status == "PROCESSING")
    assert len(embedding_rows(sync_conn, 1)) == (1 if status == "PROCESSING" else 0)


async def test_embedding_upsert_never_revives_is_deleted(engine, sync_conn):
    # An (artificial) PROCESSING stage whose embedding core already marked deleted.
    insert_state(sync_conn, 1, embedding="PROCESSING")
    insert_embedding(sync_conn, 1, basis(3), profile="old", is_deleted=True)
    assert await _upsert(engine, sync_conn, 1, basis(0)) is False
    assert embedding_rows(sync_conn, 1)[0][:2] == ("old", True)


async def test_embedding_upsert_replaces_a_live_row_but_keeps_is_deleted_out_of_its_update():
    sql = sql_code(state.Q.sql("upsert_embedding"))  # comments name is_deleted too
    update_list = sql.split("DO UPDATE", 1)[1].split("WHERE", 1)[0]
    assert "is_deleted" not in update_list
    assert "embedding = EXCLUDED.embedding" in update_list


async def test_embedding_upsert_overwrites_vector_of_same_context(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="PROCESSING")
    insert_embedding(sync_conn, 1, basis(3), profile="old-profile")
    assert await _upsert(engine, sync_conn, 1, basis(0)) is True
    assert embedding_rows(sync_conn, 1)[0][:3] == ("p", False, 8)


async def test_keywords_are_delete_then_insert(engine, sync_conn):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding="COMPLETED", keyword="PROCESSING")
    for picks in ([(101, 0.9), (301, 0.5)], [(301, 0.7)], []):
        async with engine.begin() as conn:
            await state.lock_state(conn, 1)
            assert await state.replace_keywords(conn, 1, picks, 3,
                                                claim_of(sync_conn, 1)) == len(picks)
        got = [(k, float(c), v) for k, c, v in keyword_rows(sync_conn, 1)]
        assert got == [(k, c, 3) for k, c in sorted(picks)]


@pytest.mark.parametrize("embedding,keyword", [("COMPLETED", "CANCELLED"), ("CANCELLED", "PROCESSING"),
                                               ("COMPLETED", "COMPLETED"), ("FAILED", "PROCESSING")])
async def test_keyword_writes_are_guarded(engine, sync_conn, embedding, keyword):
    seed_presets(sync_conn)
    insert_state(sync_conn, 1, embedding=embedding, keyword=keyword)
    sync_conn.execute("INSERT INTO ai.context_keyword VALUES (1, 101, 0.5, 1)")
    async with engine.begin() as conn:
        await state.lock_state(conn, 1)
        claim = claim_of(sync_conn, 1)
        assert await state.replace_keywords(conn, 1, [(301, 0.9)], 2, claim) == 0
        assert not await state.upsert_keyword_analysis(conn, 1, preset_version=2,
                                                       unmatched_concepts=[], model_profile="m",
                                                       claim=claim)
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [101]  # untouched


async def test_read_embedding_ignores_deleted_rows(engine, sync_conn):
    insert_embedding(sync_conn, 1, basis(2), profile="p1")
    insert_embedding(sync_conn, 2, basis(2), profile="p1", is_deleted=True)
    async with engine.connect() as conn:
        stored = await state.read_embedding(conn, 1)
        assert await state.read_embedding(conn, 2) is None
    assert stored.profile == "p1" and stored.vector.dtype == np.float32
    assert np.allclose(stored.vector, basis(2))


async def test_precheck_reads_statuses_profile_and_hash(engine, sync_conn):
    insert_state(sync_conn, 1, embedding="COMPLETED", keyword="FAILED")
    insert_embedding(sync_conn, 1, basis(2), profile="p1", text="hello")
    async with engine.connect() as conn:
        pre = await state.precheck(conn, 1)
        assert await state.precheck(conn, 2) is None
    assert pre.embedding_status is Status.COMPLETED and pre.keyword_status is Status.FAILED
    assert pre.embedding_profile == "p1" and len(pre.text_sha256) == 32 and not pre.has_work


def test_docs_every_ai_state_statement_names_the_rule_it_guards():
    """A documentation check, not a guard test: it passes with every guard deleted (the guards
    are proved one by one by the tests above and by the mutation catalogue). It keeps each named
    statement of ``ai/state.sql`` citing its rule (``-- Rule: SPEC §…``, ARCHITECTURE §4)."""
    for name in state.Q.names():
        assert "Rule: SPEC §" in state.Q.raw(name), name


async def test_preset_fingerprint_changes_with_any_preset_change(engine, sync_conn):
    seed_presets(sync_conn)

    async def fingerprint() -> str:
        async with engine.connect() as conn:
            return await state.preset_fingerprint(conn, "fake-profile-v1")

    first = await fingerprint()
    assert await fingerprint() == first  # stable while nothing changes
    seen = {first}
    for sql in ("UPDATE ai.keyword_preset SET visibility = 'BLOCKED' WHERE id = 101",
                "UPDATE ai.keyword_preset SET description = 'new' WHERE id = 201",
                "UPDATE ai.keyword_preset SET is_active = false WHERE id = 301",
                "UPDATE ai.keyword_preset_embedding SET updated_at = now() WHERE preset_id = 302",
                "DELETE FROM ai.keyword_preset_embedding WHERE preset_id = 401"):
        sync_conn.execute(sql)
        now = await fingerprint()
        assert now not in seen, sql
        seen.add(now)
