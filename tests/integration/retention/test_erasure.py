"""Issue 31: ``pinlog purge --member`` — an erasure request erases a withdrawn member now: its
notes' text and terms, their vectors, keywords and analysis, its records and its own row; the
CANCELLED state rows stay until the late-result window has passed (then the regular purge takes
them). An active member is refused and nothing changes; members are named by id or ref."""

from __future__ import annotations

import pytest

from pinlog.composition import erase_member, retention_parts
from pinlog.core.retention import MemberActive
from pinlog.core.services import InvalidInput, NotFound
from pinlog.core.status import status_snapshot
from pinlog.db.retention import purge_all
from tests.integration.retention.support import (
    AI_DATA,
    build_world,
    count_rows,
    marker,
    place,
    rows_of,
    set_back,
    text_anywhere,
)
from tests.integration.retention.test_purge import snapshot


async def test_erasing_a_withdrawn_member_removes_its_rows_now(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    bob = world.members_withdrawn[0]
    bobs = [n for n in world.dead if n.member_id == bob]
    others = [n.context_id for n in world.dead + world.live if n.member_id != bob]
    others_before = rows_of(sync_conn, others)

    members, report = await erase_member(config, engine, f"id:{bob}")

    assert members == [bob]
    assert report.removed == {"ai.context_embedding": 2, "ai.context_keyword": 2,
                              "ai.context_keyword_analysis": 2, "core.context": 2,
                              "core.record": 2, "core.member": 1}
    assert report.kept == {}
    for note in bobs:
        assert text_anywhere(sync_conn, marker(note)) == []
        assert all(count_rows(sync_conn, t, [note.context_id]) == 0
                   for t in ("core.context", *AI_DATA))
    assert sync_conn.execute("SELECT count(*) FROM core.member WHERE id = %s",
                             (bob,)).fetchone()[0] == 0
    # the state rows stay CANCELLED (they refuse a late result) …
    ids = [n.context_id for n in bobs]
    assert sync_conn.execute(
        "SELECT embedding_status, keyword_status FROM ai.context_ai_state WHERE context_id = "
        "ANY(%s)", (ids,)).fetchall() == [("CANCELLED", "CANCELLED")] * 2
    # … everybody else's rows are untouched (alice's deleted notes wait for their retention)
    assert rows_of(sync_conn, others) == others_before
    # past the retention (and the window) the regular purge removes them like any other
    set_back(sync_conn, 31 * 86400.0, context_ids=ids)
    later = await purge_all(retention_parts(config, engine))
    assert later.removed["ai.context_ai_state"] == 2
    assert count_rows(sync_conn, "ai.context_ai_state", ids) == 0


async def test_an_active_member_is_refused_and_nothing_changes(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    alice = world.members_active[0]
    before = snapshot(sync_conn)

    with pytest.raises(MemberActive) as refused:
        await erase_member(config, engine, str(alice))

    assert f"id:{alice}" in refused.value.message and "withdrawn" in refused.value.message
    assert snapshot(sync_conn) == before


async def test_members_are_named_by_id_or_external_ref(core, pipeline, engine, config, sync_conn):
    carol = await core.create_member("carol")
    await core.create_record(carol, place(), "캐롤의 메모")
    await core.withdraw_member(carol)
    again = await core.create_member("carol")  # the ref is free again after the withdrawal
    dave = await core.create_member(str(carol))  # a numeric ref equal to carol's id

    with pytest.raises(MemberActive):        # ref:carol names the active member too
        await erase_member(config, engine, "ref:carol")
    with pytest.raises(InvalidInput, match=f"id:{carol} or ref:{carol}"):
        await erase_member(config, engine, str(carol))  # carol's id, dave's ref
    with pytest.raises(NotFound):
        await erase_member(config, engine, "ref:nobody")
    members, report = await erase_member(config, engine, f"id:{carol}")
    assert members == [carol] and report.removed["core.member"] == 1
    with pytest.raises(NotFound):            # erased: nothing left to erase
        await erase_member(config, engine, f"id:{carol}")
    assert {m for (m,) in sync_conn.execute("SELECT id FROM core.member").fetchall()} == \
        {again, dave}


async def test_the_erasure_dry_run_counts_and_changes_nothing(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    bob = world.members_withdrawn[0]
    before = snapshot(sync_conn)

    _, dry = await erase_member(config, engine, f"id:{bob}", dry_run=True)
    assert snapshot(sync_conn) == before
    _, real = await erase_member(config, engine, f"id:{bob}")

    assert dry.dry_run and dry.removed == real.removed and real.total > 0


async def test_a_note_whose_invalidation_was_missed_is_kept_with_its_record_and_member(
        core, pipeline, engine, config, sync_conn):
    world = await build_world(core, pipeline)
    bob = world.members_withdrawn[0]
    missed, erased = [n for n in world.dead if n.member_id == bob]
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PROCESSING' "
                      "WHERE context_id = %s", (missed.context_id,))
    before = rows_of(sync_conn, [missed.context_id])

    _, report = await erase_member(config, engine, f"id:{bob}")

    assert rows_of(sync_conn, [missed.context_id]) == before
    assert all(count_rows(sync_conn, t, [erased.context_id]) == 0
               for t in ("core.context", *AI_DATA))
    assert report.kept == {"ai: not cancelled": 1,
                           "core.context: deleted but its AI state is not CANCELLED": 1}
    assert report.removed["core.record"] == 1 and report.removed["core.member"] == 0
    assert sync_conn.execute("SELECT count(*) FROM core.record WHERE id = %s",
                             (missed.record_id,)).fetchone()[0] == 1


async def test_a_purged_notes_tombstone_is_no_anomaly(core, pipeline, engine, config, sync_conn):
    """After an erasure the CANCELLED state rows outlive their notes: `pinlog status` does not
    count them as state rows without a context; a state row without its note that is not
    CANCELLED still is one."""
    world = await build_world(core, pipeline)
    await erase_member(config, engine, f"id:{world.members_withdrawn[0]}")
    stray = world.live[0].context_id + 1000
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)", (stray,))

    snap = await status_snapshot(engine, config.core.status, anomalies=True)

    assert snap["anomalies"]["state_without_context"] == 1
