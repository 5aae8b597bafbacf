"""SPEC §7.3.1 during a rolling upgrade, against the real PostgreSQL: replicas of the previous
release (they record no owners) and of this one share a database. The previous release's
statements are below verbatim in effect (its ai start, its ai save guard, core's row insert and
its rescan claim); this release's run through the real code. The fleet stays safe: never two
live owners (a stage an old replica re-claimed is never taken over by the owner rule), never a
late overwrite, nothing released early because a record no longer describes the row, and rows
without an owner are left to the expiry — as before the upgrade.
"""

from __future__ import annotations

from datetime import timedelta

from pinlog.ai import state
from pinlog.core.rescan import RescanLoop, statements
from pinlog.db.process_settings import live_processes
from pinlog.states import Stage, Status
from tests.integration.ai.support import events, save_claimed_embedding, statuses
from tests.integration.core.rescan.factory import RecordingClient, make_context
from tests.support.owners import add_process, end_lease, owner_of

EXPIRY = timedelta(minutes=10)

#: The previous release's guarded embedding start (ai/state.sql `start_embedding` before issue
#: 26): no owner recorded.
OLD_START = """
UPDATE ai.context_ai_state s
   SET embedding_status = 'PROCESSING', updated_at = now(), embedding_start_retry = s.retry_count
 WHERE s.context_id = %s
   AND (s.embedding_status = 'PENDING'
        OR (s.embedding_status = 'PROCESSING'
            AND (s.updated_at < now() - interval '600 seconds'
                 OR s.retry_count > s.embedding_start_retry)))
RETURNING context_id"""
#: Its save guard (`complete_embedding`): the status only.
OLD_COMPLETE = """
UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED', updated_at = now()
 WHERE context_id = %s AND embedding_status = 'PROCESSING' RETURNING context_id"""
#: core's `insert_state` of the previous release: no owner.
OLD_INSERT = ("INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, "
              "retry_count, updated_at) VALUES (%s, 'PENDING', 'PENDING', 0, now())")
#: Its rescan `claim` (the shared `expired` predicate is unchanged): no owner recorded.
OLD_CLAIM = ("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, rescanned_at = now() "
             "WHERE retry_count < 3 AND {expired} RETURNING context_id")
#: Its process registry's `register`: no lease.
OLD_REGISTER = ("INSERT INTO ai.process_settings (process_id, host, pid, components, settings) "
                "VALUES ('old-replica', 'old-host', 2, 'core,ai', '{}')")


def _old_claim(conn) -> list[int]:
    sql = OLD_CLAIM.format(expired=statements().sql("expired")).replace(
        ":pending_expiry", "'300 seconds'").replace(":processing_expiry", "'600 seconds'")
    return [r[0] for r in conn.execute(sql)]


#: the row ``make_context`` gives context 1 (member 1, record 1), for the embedding save
FLEET_ROW = {"user_id": 1, "record_id": 1, "text_sha256": b"\x02" * 32}


async def _start(engine, cid: int, owner: str | None) -> state.Claim | None:
    async with engine.begin() as conn:
        return await state.start_stage(conn, cid, Stage.EMBEDDING, EXPIRY, owner)


async def test_a_stage_an_old_replica_reclaimed_is_never_taken_over_and_no_late_save_lands(
        engine, sync_conn):
    new_a, new_b = add_process(sync_conn), add_process(sync_conn)
    sync_conn.execute(OLD_INSERT, (1,))
    claim = await _start(engine, 1, new_a)
    assert claim is not None and claim.owner == new_a
    # A stalls past the expiry (the row's and the claim's clock move back together) and dies
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - interval '1 hour',"
                      " owned_at = owned_at - interval '1 hour'")
    end_lease(sync_conn, new_a)
    # an old replica re-claims by the expiry: it records no owner (A's record stays behind)
    assert sync_conn.execute(OLD_START, (1,)).fetchall() == [(1,)]
    assert owner_of(sync_conn, 1)[0] == new_a
    # A's death must not release the old replica's live stage: never two live owners
    assert await _start(engine, 1, new_b) is None
    assert await RescanLoop(engine, _config(), RecordingClient()).claim() == []
    # A's late result is refused; the old replica's save lands
    late = state.Claim(Status.PENDING, new_a, claim.claimed_at - timedelta(hours=1))
    assert await save_claimed_embedding(engine, late, **FLEET_ROW) is False
    assert sync_conn.execute(OLD_COMPLETE, (1,)).fetchall() == [(1,)]
    assert statuses(sync_conn, 1) == ("COMPLETED", "PENDING")
    assert await save_claimed_embedding(engine, late, **FLEET_ROW) is False  # never a late overwrite


async def test_rows_an_old_core_creates_wait_for_the_expiry_and_a_new_start_owns_them(
        engine, sync_conn):
    sync_conn.execute(OLD_INSERT, (1,))
    end_lease(sync_conn, add_process(sync_conn))  # every process of this release died …
    assert await RescanLoop(engine, _config(), RecordingClient()).claim() == []  # … nothing early
    me = add_process(sync_conn)
    claim = await _start(engine, 1, me)
    assert claim is not None and owner_of(sync_conn, 1)[0] == me


async def test_an_old_rescan_claim_makes_the_sender_record_unknown(engine, sync_conn):
    """A row this release's core created (its sender recorded) is claimed by an old rescan (no
    owner recorded): the sender's death then releases nothing — the old claimer sends it."""
    sender = add_process(sync_conn)
    cid = make_context(sync_conn, age_s=400)  # PENDING past its expiry
    sync_conn.execute("UPDATE ai.context_ai_state SET owner = %s, owned_at = updated_at "
                      "WHERE context_id = %s", (sender, cid))
    assert _old_claim(sync_conn) == [cid]
    end_lease(sync_conn, sender)
    assert await RescanLoop(engine, _config(), RecordingClient()).claim() == []
    # the old claimer's re-send reaches a new ai replica: a normal start, its owner recorded
    me = add_process(sync_conn)
    async with engine.begin() as conn:
        claim = await state.start_stage(conn, cid, Stage.EMBEDDING, EXPIRY, me)
    assert claim is not None and claim.previous is Status.PENDING and claim.owner == me
    assert [e[3] for e in events(sync_conn, cid)] == ["ai"]


async def test_old_replicas_heartbeat_rows_stay_in_the_settings_comparison(engine, sync_conn):
    """A row of the previous release's registry has no lease: it is neither live for the owner
    rule (it owns nothing recorded) nor dropped from `pinlog status` while it heartbeats."""
    sync_conn.execute(OLD_REGISTER)
    assert [p.process_id for p in await live_processes(engine)] == ["old-replica"]


def _config():
    from pinlog.core.rescan import RescanConfig

    return RescanConfig(enabled=True, interval=timedelta(minutes=5),
                        pending_expiry=timedelta(minutes=5), processing_expiry=EXPIRY,
                        max_retries=3, batch_size=100, concurrency=2, busy_wait=0.0)
