"""Concurrent lifecycle calls on one record: the record lock keeps the invariants (SPEC §4).

The outcome assertions hold whatever the interleaving; the record row lock is what makes them
true (without it both deletes of the last two contexts could commit)."""

from __future__ import annotations

import asyncio

import psycopg

from pinlog.core.services import NotFound, RecordExists
from tests.integration.core.conftest import place
from tests.integration.core.support import count


async def test_concurrent_deletes_never_remove_the_last_context(service, sync_conn):
    member = await service.create_member()
    for n in range(10):
        record_id, a = await service.create_record(member, place(n), "a")
        b = await service.add_context(member, record_id, "b")
        results = await asyncio.gather(service.delete_context(member, a),
                                       service.delete_context(member, b), return_exceptions=True)
        assert sorted(type(r).__name__ for r in results) == ["LastContext", "NoneType"]
        assert count(sync_conn, "SELECT count(*) FROM core.context WHERE record_id = %s AND "
                     "deleted_at IS NULL", record_id) == 1


async def test_concurrent_edits_of_one_context_make_one_new_context(service, dispatcher, client, sync_conn):
    member = await service.create_member()
    record_id, old = await service.create_record(member, place(), "old")
    results = await asyncio.gather(*(service.edit_context(member, old, f"new {i}") for i in range(4)),
                                   return_exceptions=True)
    winners = [r for r in results if isinstance(r, int)]
    assert len(winners) == 1 and all(isinstance(r, NotFound) for r in results if r not in winners)
    assert sync_conn.execute("SELECT id FROM core.context WHERE record_id = %s AND deleted_at IS NULL",
                             (record_id,)).fetchall() == [(winners[0],)]
    assert count(sync_conn, "SELECT count(*) FROM core.context") == 2  # losers rolled back
    await dispatcher.join()
    assert sorted(r.context_id for r in client.sent) == sorted([old, winners[0]])


async def test_concurrent_creates_for_one_place_make_one_record(service, sync_conn):
    member = await service.create_member()
    results = await asyncio.gather(*(service.create_record(member, place(), f"t{i}") for i in range(4)),
                                   return_exceptions=True)
    created = [r for r in results if isinstance(r, tuple)]
    assert len(created) == 1
    assert all(isinstance(r, RecordExists) and r.record_id == created[0][0]
               for r in results if not isinstance(r, tuple))
    assert count(sync_conn, "SELECT count(*) FROM core.place") == 1
    assert count(sync_conn, "SELECT count(*) FROM core.context") == 1


async def test_edit_waits_for_a_record_lock_held_elsewhere(service, db_url, sync_conn):
    """The edit locks the record first: while another session holds it, nothing is inserted."""
    member = await service.create_member()
    record_id, old = await service.create_record(member, place(), "old")
    with psycopg.connect(db_url) as locker:
        locker.execute("SELECT id FROM core.record WHERE id = %s FOR UPDATE", (record_id,))
        edit = asyncio.create_task(service.edit_context(member, old, "new"))
        # wait until the edit is blocked on the lock (observed in pg_locks, no sleep-ordering)
        blocked: list[str] = []
        for _ in range(500):  # poll the server's lock table until the edit waits (no fixed sleep)
            blocked = [row[0] for row in sync_conn.execute(
                "SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()").fetchall()]
            if blocked:
                break
            await asyncio.sleep(0.01)
        # blocked on the record lock, before inserting anything
        assert len(blocked) == 1 and "FROM core.record" in blocked[0] and "FOR UPDATE" in blocked[0]
        assert not edit.done()
        locker.rollback()
    new = await edit
    assert count(sync_conn, "SELECT count(*) FROM core.context WHERE deleted_at IS NULL") == 1
    assert sync_conn.execute("SELECT id FROM core.context WHERE deleted_at IS NULL").fetchone() == (new,)
