"""The maintained state counts (migration 0008_operator_console, ``core/status.sql``): triggers
append deltas in the writer's transaction, compaction folds them in; readers never scan the
state table, and the counts equal a full count whatever the interleaving (SPEC §12)."""

from __future__ import annotations

import psycopg

from pinlog.core.status import compact_state_counts, state_counts
from tests.integration.core.support import full_count


async def counted(engine) -> dict[str, dict[str, int]]:
    async with engine.connect() as conn:
        rows = await state_counts(conn)
    return {stage: {s: n for s, n in c.items() if n} for stage, c in rows.items()}


async def test_counts_follow_inserts_updates_deletes_and_truncate(engine, sync_conn):
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) SELECT generate_series(1, 500)")
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED' "
                      "WHERE context_id <= 300")
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = retry_count + 1")  # no status
    sync_conn.execute("DELETE FROM ai.context_ai_state WHERE context_id > 450")
    assert await counted(engine) == full_count(sync_conn)
    assert await compact_state_counts(engine)
    assert sync_conn.execute("SELECT count(*) FROM ai.state_count_delta").fetchone()[0] == 0
    assert await counted(engine) == full_count(sync_conn) == {
        "embedding": {"COMPLETED": 300, "PENDING": 150}, "keyword": {"PENDING": 450}}
    sync_conn.execute("TRUNCATE ai.context_ai_state")
    assert await counted(engine) == {"embedding": {}, "keyword": {}}


async def test_compaction_keeps_a_writers_uncommitted_deltas(engine, db_url, sync_conn):
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) SELECT generate_series(1, 10)")
    with psycopg.connect(db_url) as writer:  # a transaction still open during the compaction
        writer.execute("UPDATE ai.context_ai_state SET keyword_status = 'CANCELLED', "
                       "embedding_status = 'CANCELLED' WHERE context_id <= 4")
        assert await compact_state_counts(engine)
        assert await counted(engine) == {"embedding": {"PENDING": 10}, "keyword": {"PENDING": 10}}
        writer.commit()
    assert await counted(engine) == full_count(sync_conn)
    assert await compact_state_counts(engine)
    assert await counted(engine) == full_count(sync_conn) == {
        "embedding": {"CANCELLED": 4, "PENDING": 6}, "keyword": {"CANCELLED": 4, "PENDING": 6}}


async def test_one_compaction_at_a_time_and_the_counts_stay_right(engine, db_url, sync_conn):
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) SELECT generate_series(1, 3)")
    with psycopg.connect(db_url) as other:
        assert other.execute("SELECT pg_try_advisory_xact_lock(hashtext('pinlog.state_count'))"
                             ).fetchone()[0]
        assert not await compact_state_counts(engine)  # the other one is compacting
        assert await counted(engine) == full_count(sync_conn)
    assert await compact_state_counts(engine)


async def test_a_rolled_back_write_leaves_no_delta(engine, db_url, sync_conn):
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) VALUES (1)")
    with psycopg.connect(db_url) as writer:
        writer.execute("UPDATE ai.context_ai_state SET embedding_status = 'FAILED'")
        writer.rollback()
    assert await counted(engine) == full_count(sync_conn) == {
        "embedding": {"PENDING": 1}, "keyword": {"PENDING": 1}}
