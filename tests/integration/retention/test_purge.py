"""Issue 31 on the real PostgreSQL: past the retention a deleted or superseded note, its
record, a withdrawn member and all their AI data are gone — no trace of the text, its terms or
its vectors; live notes, their data and their history are untouched; history goes by its own
retention; what core has not invalidated is kept and reported; the dry run counts exactly what
the purge removes and changes nothing."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from pinlog.composition import retention_parts, running_components
from pinlog.db.retention import RetentionLoop, purge_all
from tests.conftest import config_of
from tests.integration.ai.support import ai_settings_for
from tests.integration.retention.support import (
    AI_DATA,
    Note,
    build_world,
    count_rows,
    marker,
    place,
    process,
    rows_of,
    set_back,
    set_events_back,
    text_anywhere,
)

DAY = 86400.0
#: Past the default PINLOG_RETENTION_DELETED (30 days).
PAST = 31 * DAY


def snapshot(conn) -> dict[str, int]:
    """Row counts of every core.* and ai.* table but the bookkeeping ones (the migration
    version; the trigger-kept state counts, whose deltas a status read may fold at any time)."""
    tables = [r[0] for r in conn.execute(
        "SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname IN ('core','ai') "
        "AND tablename NOT IN ('alembic_version', 'state_count', 'state_count_delta') ORDER BY 1").fetchall()]
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


async def test_past_the_retention_no_trace_of_a_deleted_note_remains(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    for note in world.dead:  # the ai job left its data: vectors, keywords, analysis, terms
        assert all(count_rows(sync_conn, t, [note.context_id]) for t in AI_DATA), note
        assert text_anywhere(sync_conn, marker(note)) == ["core.context"]
    # a vector of another profile (left by a profile switch) is a vector of the note too
    sync_conn.execute("UPDATE ai.context_embedding SET embedding_profile = 'older-profile-v0' "
                      "WHERE context_id = %s", (world.dead[0].context_id,))
    live_before = rows_of(sync_conn, world.live_ids)
    set_back(sync_conn, PAST)

    report = await purge_all(retention_parts(config, engine))

    for note in world.dead:
        assert text_anywhere(sync_conn, marker(note)) == [], note
        left = {t: rows for t, rows in rows_of(sync_conn, [note.context_id]).items() if rows}
        assert list(left) == ["ai.context_ai_event"], note  # history: its own retention
    assert rows_of(sync_conn, world.live_ids) == live_before
    for note in world.live:
        assert text_anywhere(sync_conn, marker(note)) == ["core.context"]
    # the deleted record and the withdrawn member are gone; the active ones stay
    records = {r for (r,) in sync_conn.execute("SELECT id FROM core.record").fetchall()}
    assert records == {n.record_id for n in world.live}
    members = {m for (m,) in sync_conn.execute("SELECT id FROM core.member").fetchall()}
    assert members == set(world.members_active)
    dead = len(world.dead)
    assert report.removed == {
        "core.context": dead, "core.record": len(world.records_deleted), "core.member": 1,
        "ai.context_embedding": dead, "ai.context_keyword": dead,
        "ai.context_keyword_analysis": dead, "ai.context_ai_state": dead,
        "ai.context_ai_event": 0}
    assert report.kept == {} and report.off == []


async def test_live_notes_recent_deletions_and_unfinished_rows_are_untouched(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    # a note deleted five days ago: inside the retention
    record, recent = await core.create_record(world.members_active[0], place(),
                                              "5일 전에 지운 메모")
    await core.add_context(world.members_active[0], record, "남겨 둘 메모")
    await core.delete_context(world.members_active[0], recent)
    # a half-cancelled row (one stage CANCELLED, the other PENDING: the finalizer still ends it)
    _, half = await core.create_record(world.members_active[0], place(), "반쯤 취소")
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                      "updated_at = now() - interval '100 days' WHERE context_id = %s", (half,))
    # live notes written long ago (their history younger than its 90-day retention)
    sync_conn.execute("UPDATE core.context SET created_at = created_at - interval '400 days' "
                      "WHERE deleted_at IS NULL")
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - interval "
                      "'100 days' WHERE embedding_status <> 'CANCELLED'")
    set_events_back(sync_conn, 89 * DAY)
    set_back(sync_conn, 5 * DAY, context_ids=[recent])
    set_back(sync_conn, PAST, context_ids=world.dead_ids)
    kept_ids = [*world.live_ids, recent, half]
    before = rows_of(sync_conn, kept_ids)
    assert all(before[t] for t in before)

    report = await purge_all(retention_parts(config, engine))

    assert rows_of(sync_conn, kept_ids) == before
    assert report.removed["core.context"] == report.removed["ai.context_ai_state"] == \
        len(world.dead)
    assert report.removed["ai.context_ai_event"] == 0


async def test_history_rows_go_by_their_own_retention(core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    old, young = world.live[0].context_id, world.live[1].context_id
    set_events_back(sync_conn, 91 * DAY, context_ids=[old, *world.dead_ids])
    set_events_back(sync_conn, 89 * DAY, context_ids=[young])
    expected = count_rows(sync_conn, "ai.context_ai_event", [old, *world.dead_ids])
    young_events = rows_of(sync_conn, [young])["ai.context_ai_event"]
    assert expected > config.ai.retention.batch_size  # several batches

    report = await purge_all(retention_parts(config, engine))

    assert report.removed["ai.context_ai_event"] == expected
    assert count_rows(sync_conn, "ai.context_ai_event", [old, *world.dead_ids]) == 0
    assert rows_of(sync_conn, [young])["ai.context_ai_event"] == young_events
    # the live note itself is untouched (only its old history went)
    assert count_rows(sync_conn, "ai.context_ai_state", [old]) == 1
    assert report.removed["core.context"] == 0  # nothing else was due


async def test_a_deleted_note_whose_invalidation_was_missed_is_kept_and_reported(
        core, pipeline, engine, config, sync_conn):
    member = await core.create_member()
    record, missed = await core.create_record(member, place(), "무효화가 빠진 메모")
    await process(pipeline, [Note(missed, record, member, "무효화가 빠진 메모")])
    # deleted in core, but its state still says the embedding is being reprocessed
    sync_conn.execute("UPDATE core.context SET deleted_at = now() WHERE id = %s", (missed,))
    sync_conn.execute("UPDATE core.record SET deleted_at = now() WHERE id = %s", (record,))
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PROCESSING' "
                      "WHERE context_id = %s", (missed,))
    set_back(sync_conn, PAST)
    before = rows_of(sync_conn, [missed])

    report = await purge_all(retention_parts(config, engine))

    assert rows_of(sync_conn, [missed]) == before
    assert sync_conn.execute("SELECT count(*) FROM core.record WHERE id = %s",
                             (record,)).fetchone()[0] == 1
    assert report.kept == {"core.context: deleted but its AI state is not CANCELLED": 1}
    assert report.total == 0


async def test_the_dry_run_counts_exactly_what_the_purge_removes(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    set_back(sync_conn, PAST)
    set_events_back(sync_conn, 91 * DAY, context_ids=world.dead_ids[:2])
    parts = retention_parts(config, engine)
    before = snapshot(sync_conn)

    dry = await purge_all(parts, dry_run=True)
    assert snapshot(sync_conn) == before
    real = await purge_all(parts)

    assert dry.dry_run and not real.dry_run
    assert dry.removed == real.removed and dry.total == real.total > 0
    after = snapshot(sync_conn)
    assert {t: before[t] - after[t] for t in before if before[t] != after[t]} == \
        {t: n for t, n in real.removed.items() if n}


def _purged(table: str) -> float:
    return REGISTRY.get_sample_value("pinlog_purged_rows_total", {"table": table}) or 0.0


def _oldest(table: str) -> float | None:
    return REGISTRY.get_sample_value("pinlog_retention_oldest_deleted_seconds", {"table": table})


async def test_rows_purged_and_the_oldest_deleted_row_kept_are_measured(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    alice = world.members_active[0]
    record, recent = await core.create_record(alice, place(), "닷새 전에 지운 메모")
    await core.add_context(alice, record, "남는 메모")
    await core.delete_context(alice, recent)
    set_back(sync_conn, 5 * DAY, context_ids=[recent])
    set_back(sync_conn, PAST, context_ids=world.dead_ids)
    loop = RetentionLoop(retention_parts(config, engine), config.ai.retention.interval)
    tables = ["core.context", "core.record", "core.member", "ai.context_embedding",
              "ai.context_keyword", "ai.context_keyword_analysis", "ai.context_ai_state",
              "ai.context_ai_event"]
    before = {t: _purged(t) for t in tables}

    dry = await purge_all(loop.parts, dry_run=True)
    assert dry.total > 0 and {t: _purged(t) for t in tables} == before  # a dry run counts nothing
    report = await loop.run_round()

    assert {t: _purged(t) - before[t] for t in tables} == {t: report.removed[t] for t in tables}
    assert report.removed["core.context"] == len(world.dead)
    # the oldest deleted row kept is the note deleted five days ago (seconds, database clock)
    for table in ("core.context", "ai.context_ai_state"):
        assert 5 * DAY <= _oldest(table) < 5 * DAY + 600, table
    assert _oldest("core.record") == 0.0 and _oldest("core.member") == 0.0  # none kept


async def test_a_running_process_purges_in_the_background_unless_one_shot(
        tmp_path, db_url, engine, core, pipeline, provider, judge, sync_conn):
    world = await build_world(core, pipeline)
    set_back(sync_conn, PAST)
    config = config_of(ai_settings_for(tmp_path, db_url, retention_enabled=True,
                                       retention_interval=0.05))
    kwargs = {"provider": provider, "judge": judge}
    async with running_components(config, engine, rescan=False, retention=False,
                                  ai_kwargs=kwargs) as parts:
        assert parts.retention is None  # a one-shot command
    async with running_components(config, engine, rescan=False, ai_kwargs=kwargs) as parts:
        assert parts.retention is not None
        await asyncio.wait_for(parts.retention.round_ended.wait(), 30)
        report = parts.retention.last_report
    assert report is not None and report.removed["core.context"] == len(world.dead)
    assert count_rows(sync_conn, "core.context", world.dead_ids) == 0
