"""Races against the state machine (SPEC §3, §4, §5.2, §5.3, §7): deletes, edits, withdrawals,
duplicates and rescans landing at every point of a live job, on the full app (core + ai,
in-process adapter, real PostgreSQL, fake models held at gates).

Global invariants checked after every scenario (:func:`assert_invariants`):
- a deleted context (or one of a deleted record / withdrawn member) has both stages CANCELLED,
  its embedding (if any) is ``is_deleted``;
- an active context is never CANCELLED;
- an active record has at least one active context;
- nothing is left PENDING/PROCESSING without a path to recovery (every unfinished row is a
  rescan candidate once expired, i.e. not CANCELLED and not a half-cancelled pair).
"""

from __future__ import annotations

import asyncio

import pytest

from pinlog.core.rescan import RescanLoop
from tests.acceptance.adversarial.conftest import full_app, record_body
from tests.integration.ai.conftest import ai_settings_for
from tests.integration.ai.support import seed_presets
from tests.integration.ai.support import FRIENDS_TEXT, QUIET_TEXT
from tests.conftest import config_of


def assert_invariants(conn) -> None:
    bad = conn.execute("""
        SELECT c.id, s.embedding_status, s.keyword_status
          FROM core.context c
          JOIN core.record r ON r.id = c.record_id
          JOIN core.member m ON m.id = c.member_id
          LEFT JOIN ai.context_ai_state s ON s.context_id = c.id
         WHERE (c.deleted_at IS NOT NULL OR r.deleted_at IS NOT NULL OR m.deleted_at IS NOT NULL)
           AND (s.embedding_status IS DISTINCT FROM 'CANCELLED'
                OR s.keyword_status IS DISTINCT FROM 'CANCELLED')""").fetchall()
    assert bad == [], f"deleted contexts not CANCELLED: {bad}"
    bad = conn.execute("""
        SELECT e.context_id FROM ai.context_embedding e
          JOIN core.context c ON c.id = e.context_id
          JOIN core.record r ON r.id = c.record_id
          JOIN core.member m ON m.id = c.member_id
         WHERE NOT e.is_deleted
           AND (c.deleted_at IS NOT NULL OR r.deleted_at IS NOT NULL OR m.deleted_at IS NOT NULL)
    """).fetchall()
    assert bad == [], f"embeddings of deleted contexts still visible: {bad}"
    bad = conn.execute("""
        SELECT c.id FROM core.context c JOIN ai.context_ai_state s ON s.context_id = c.id
         WHERE c.deleted_at IS NULL
           AND (s.embedding_status = 'CANCELLED' OR s.keyword_status = 'CANCELLED')""").fetchall()
    assert bad == [], f"active contexts CANCELLED: {bad}"
    bad = conn.execute("""
        SELECT r.id FROM core.record r
         WHERE r.deleted_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM core.context c
                            WHERE c.record_id = r.id AND c.deleted_at IS NULL)""").fetchall()
    assert bad == [], f"active records without an active context: {bad}"
    bad = conn.execute("""
        SELECT context_id FROM ai.context_ai_state
         WHERE (embedding_status = 'CANCELLED') <> (keyword_status = 'CANCELLED')""").fetchall()
    assert bad == [], f"half-cancelled rows: {bad}"
    bad = conn.execute("SELECT context_id FROM ai.context_ai_state s WHERE NOT EXISTS "
                       "(SELECT 1 FROM core.context c WHERE c.id = s.context_id)").fetchall()
    assert bad == [], f"state rows without a context: {bad}"


def _state(conn, cid):
    return conn.execute("SELECT embedding_status, keyword_status FROM ai.context_ai_state "
                        "WHERE context_id = %s", (cid,)).fetchone()


def _rows(conn, table, cid):
    return conn.execute(f"SELECT count(*) FROM {table} WHERE context_id = %s", (cid,)).fetchone()[0]


async def _record_with_two(full, auth, n=1):
    r = await full.http.post("/v1/records", json=record_body(n, text=QUIET_TEXT), headers=auth)
    assert r.status_code == 201
    record_id, first = r.json()["recordId"], r.json()["contextId"]
    await full.settle()
    r = await full.http.post(f"/v1/records/{record_id}/contexts", json={"text": FRIENDS_TEXT},
                             headers=auth)
    assert r.status_code == 201
    return record_id, first, r.json()["contextId"]


async def _settled_record_with_two(full):
    """A new member's record with two contexts, both processed: ``(auth, record_id, first,
    second)``."""
    _, auth = await full.member()
    record_id, first, cid = await _record_with_two(full, auth)
    await full.settle()
    return auth, record_id, first, cid


@pytest.mark.parametrize("action", ["delete_context", "edit", "delete_record", "withdraw"])
async def test_invalidation_while_embedding_is_computed(full, sync_conn, action):
    _, auth = await full.member()
    r = await full.http.post("/v1/records", json=record_body(1, text=QUIET_TEXT), headers=auth)
    record_id = r.json()["recordId"]
    await full.settle()
    gate = full.provider.hold()
    r = await full.http.post(f"/v1/records/{record_id}/contexts", json={"text": FRIENDS_TEXT},
                             headers=auth)
    cid = r.json()["contextId"]
    await gate.wait_entered()
    assert _state(sync_conn, cid) == ("PROCESSING", "PENDING")
    if action == "delete_context":
        assert (await full.http.delete(f"/v1/contexts/{cid}", headers=auth)).status_code == 204
    elif action == "edit":
        full.provider.gate = None  # the new context's own job runs freely
        assert (await full.http.put(f"/v1/contexts/{cid}", json={"text": "새 메모"},
                                    headers=auth)).status_code == 200
    elif action == "delete_record":
        assert (await full.http.delete(f"/v1/records/{record_id}?force=true",
                                       headers=auth)).status_code == 204
    else:
        assert (await full.http.delete("/v1/me", headers=auth)).status_code == 204
    judge_calls = full.judge.calls
    gate.open()
    await full.settle()
    assert _state(sync_conn, cid) == ("CANCELLED", "CANCELLED")
    assert _rows(sync_conn, "ai.context_embedding", cid) == 0
    assert _rows(sync_conn, "ai.context_keyword", cid) == 0
    assert _rows(sync_conn, "ai.context_keyword_analysis", cid) == 0
    if action != "edit":
        assert full.judge.calls == judge_calls  # no judge call for the cancelled context
    assert_invariants(sync_conn)


@pytest.mark.parametrize("action", ["delete_context", "edit", "withdraw"])
async def test_invalidation_while_keywords_are_judged(full, sync_conn, action):
    auth, record_id, first, cid = await _settled_record_with_two(full)
    # reprocess the second one's keyword stage with a held judge
    sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'PENDING' "
                      "WHERE context_id = %s", (cid,))
    sync_conn.execute("DELETE FROM ai.context_keyword WHERE context_id = %s", (cid,))
    sync_conn.execute("DELETE FROM ai.context_keyword_analysis WHERE context_id = %s", (cid,))
    gate = full.judge.hold()
    body = sync_conn.execute("SELECT member_id, record_id, body FROM core.context WHERE id = %s",
                             (cid,)).fetchone()
    from pinlog.contracts import ProcessRequest

    assert await full.ai.submit(ProcessRequest(context_id=cid, user_id=body[0], record_id=body[1],
                                               text=body[2])) == 202
    await gate.wait_entered()
    assert _state(sync_conn, cid) == ("COMPLETED", "PROCESSING")
    full.judge.gate = None
    if action == "delete_context":
        assert (await full.http.delete(f"/v1/contexts/{cid}", headers=auth)).status_code == 204
    elif action == "edit":
        assert (await full.http.put(f"/v1/contexts/{cid}", json={"text": "새 메모"},
                                    headers=auth)).status_code == 200
    else:
        assert (await full.http.delete("/v1/me", headers=auth)).status_code == 204
    gate.open()
    await full.settle()
    assert _state(sync_conn, cid) == ("CANCELLED", "CANCELLED")
    assert _rows(sync_conn, "ai.context_keyword", cid) == 0
    assert _rows(sync_conn, "ai.context_keyword_analysis", cid) == 0
    assert sync_conn.execute("SELECT is_deleted FROM ai.context_embedding WHERE context_id = %s",
                             (cid,)).fetchone() == (True,)
    assert_invariants(sync_conn)


async def test_duplicate_concurrent_requests_one_model_call_per_stage(full, sync_conn):
    _, auth = await full.member()
    gate = full.provider.hold()
    r = await full.http.post("/v1/records", json=record_body(1, text=QUIET_TEXT), headers=auth)
    cid, record_id = r.json()["contextId"], r.json()["recordId"]
    member = sync_conn.execute("SELECT member_id FROM core.context WHERE id = %s",
                               (cid,)).fetchone()[0]
    await gate.wait_entered()
    from pinlog.contracts import ProcessRequest

    request = ProcessRequest(context_id=cid, user_id=member, record_id=record_id, text=QUIET_TEXT)
    for _ in range(8):
        assert await full.ai.submit(request) == 202
    await asyncio.sleep(0.2)
    gate.open()
    await full.settle()
    for _ in range(4):  # and again after completion
        assert await full.ai.submit(request) == 202
    await full.settle()
    assert full.provider.calls == 1
    assert full.judge.calls == 1
    assert _state(sync_conn, cid) == ("COMPLETED", "COMPLETED")
    assert _rows(sync_conn, "ai.context_embedding", cid) == 1
    assert _rows(sync_conn, "ai.context_keyword", cid) == 1
    assert_invariants(sync_conn)


@pytest.fixture
async def full_two_lanes(tmp_path, db_url, sync_conn, provider, judge):
    """The full app with two passage calls in flight (as a remote endpoint has; a local model
    gets one) and a held call's timeout (120 s × the batcher's minimum share = 30 s) no shorter
    than the gate's: the re-sent job's call runs beside the stale worker's held one. With one
    lane it would wait for the held call to time out, and the stale worker's retry after its
    (jittered) backoff would race the re-sent job — a wall-clock margin."""
    seed_presets(sync_conn)
    settings = ai_settings_for(tmp_path, db_url, embedding_timeout=120.0, llm_timeout=30.0)
    async with full_app(settings, db_url, provider, judge) as value:
        lane = value.ai.provider.limit  # the micro-batcher's passage lane (AdaptiveLimit)
        lane.maximum, lane.limit = 2, 2.0
        yield value


async def test_rescan_reclaim_racing_a_live_but_slow_worker(full_two_lanes, sync_conn):
    """A worker that outlives the processing expiry (budget rule broken by a stall) races the
    rescan's re-send: at most one result is stored, keywords are not doubled, COMPLETED is
    reached, and a cancel during the race still wins."""
    full = full_two_lanes
    _, auth = await full.member()
    gate = full.provider.hold()
    r = await full.http.post("/v1/records", json=record_body(1, text=QUIET_TEXT), headers=auth)
    cid = r.json()["contextId"]
    await gate.wait_entered()
    loop = RescanLoop(full.core.engine, config_of(full.settings).core.rescan, full.core.client)
    # fresh PROCESSING: never claimed
    assert (await loop.run_round()).claimed == 0
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() - interval '1 hour' "
                      "WHERE context_id = %s", (cid,))
    full.provider.gate = None  # the re-sent job calls the model freely
    report = await loop.run_round()
    assert report.claimed_ids == [cid] and report.dispatched_ids == [cid]
    # the re-sent job re-claims the stage and finishes it while the stale worker is held (an
    # event this test waits for — not a sleep that hopes it happened)
    async with asyncio.timeout(30):
        while _state(sync_conn, cid) != ("COMPLETED", "COMPLETED"):
            await asyncio.sleep(0.01)
    assert full.provider.calls == 2  # the held call and the re-sent job's
    gate.open()  # the stale worker wakes up late: its save is refused
    await full.settle()
    assert _state(sync_conn, cid) == ("COMPLETED", "COMPLETED")
    assert _rows(sync_conn, "ai.context_embedding", cid) == 1
    assert _rows(sync_conn, "ai.context_keyword", cid) == 1
    assert full.judge.calls == 1
    assert_invariants(sync_conn)


async def test_rescan_claim_then_delete_before_resend(full, sync_conn):
    """§11 #18 through the public API: claimed, then deleted, then re-sent: no model call."""
    auth, record_id, first, cid = await _settled_record_with_two(full)
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING', "
                      "keyword_status = 'PENDING', updated_at = now() - interval '1 hour' "
                      "WHERE context_id = %s", (cid,))
    sync_conn.execute("DELETE FROM ai.context_embedding WHERE context_id = %s", (cid,))
    calls = full.provider.calls
    loop = RescanLoop(full.core.engine, config_of(full.settings).core.rescan, full.core.client)
    assert await loop.claim() == [cid]
    assert (await full.http.delete(f"/v1/contexts/{cid}", headers=auth)).status_code == 204
    report = await loop.dispatch([cid])
    await full.settle()
    assert report.skipped_deleted == [cid]
    assert full.provider.calls == calls
    assert _state(sync_conn, cid) == ("CANCELLED", "CANCELLED")
    assert_invariants(sync_conn)


async def test_finalizer_vs_delete_and_live_worker(full, sync_conn):
    """Exhausted + expired rows: the finalizer fails only unfinished stages, never a CANCELLED
    one; a worker that is still running when the finalizer fires cannot save over FAILED."""
    auth, record_id, first, cid = await _settled_record_with_two(full)
    # cid: exhausted, keyword PROCESSING for an hour; first: exhausted embedding PENDING, then deleted
    sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'PROCESSING', "
                      "retry_count = 3, updated_at = now() - interval '1 hour' "
                      "WHERE context_id = %s", (cid,))
    r = await full.http.post(f"/v1/records/{record_id}/contexts", json={"text": "세번째"},
                             headers=auth)
    third = r.json()["contextId"]
    await full.settle()
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING', "
                      "keyword_status = 'PENDING', retry_count = 3, "
                      "updated_at = now() - interval '1 hour' WHERE context_id = %s", (third,))
    loop = RescanLoop(full.core.engine, config_of(full.settings).core.rescan, full.core.client)
    # the delete holds the state row lock while the finalizer runs: skipped, then CANCELLED wins
    import psycopg

    with psycopg.connect(full.settings.database_url.get_secret_value(), autocommit=False) as tx:
        tx.execute("SELECT 1 FROM ai.context_ai_state WHERE context_id = %s FOR UPDATE", (third,))
        tx.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                   "keyword_status = 'CANCELLED', updated_at = now() WHERE context_id = %s",
                   (third,))
        tx.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = %s",
                   (third,))
        tx.execute("UPDATE core.context SET deleted_at = now() WHERE id = %s", (third,))
        dead, finalized = await loop.finalize()
        tx.commit()
    assert third not in finalized and cid in finalized
    assert _state(sync_conn, third) == ("CANCELLED", "CANCELLED")
    assert _state(sync_conn, cid) == ("COMPLETED", "FAILED")
    assert (await loop.run_round()).finalized == 0
    assert_invariants(sync_conn)


async def test_concurrent_lifecycle_storm_keeps_invariants(full, sync_conn):
    """Edits, deletes, record deletes, adds and a withdrawal fired concurrently at one member's
    records while jobs run: every response is a clear answer (no 500) and the invariants hold."""
    _, auth = await full.member()
    _, bystander = await full.member()
    records = []
    for n in range(4):
        records.append(await _record_with_two(full, auth, n=n + 1))
    by = await _record_with_two(full, bystander, n=99)
    calls = []
    for record_id, a, b in records:
        calls += [
            ("PUT", f"/v1/contexts/{a}", {"text": "수정 A"}),
            ("PUT", f"/v1/contexts/{a}", {"text": "수정 A2"}),
            ("DELETE", f"/v1/contexts/{b}", None),
            ("DELETE", f"/v1/contexts/{a}", None),
            ("POST", f"/v1/records/{record_id}/contexts", {"text": "추가"}),
            ("DELETE", f"/v1/records/{record_id}", None),
            ("DELETE", f"/v1/records/{record_id}?force=true", None),
        ]
    calls.append(("DELETE", "/v1/me", None))

    async def fire(method, path, body):
        return await full.http.request(method, path, headers=auth, json=body)

    responses = await asyncio.gather(*(fire(*c) for c in calls))
    statuses = [r.status_code for r in responses]
    assert all(s < 500 for s in statuses), list(zip(calls, statuses, strict=True))
    await full.settle()
    assert_invariants(sync_conn)
    # the bystander is untouched
    assert _state(sync_conn, by[1]) == ("COMPLETED", "COMPLETED")
    assert _state(sync_conn, by[2]) == ("COMPLETED", "COMPLETED")
    # after the storm nothing is left unfinished for a member that no longer exists
    left = sync_conn.execute("""SELECT s.context_id FROM ai.context_ai_state s
        JOIN core.context c ON c.id = s.context_id
        WHERE c.deleted_at IS NULL AND (s.embedding_status IN ('PENDING','PROCESSING')
                                        OR s.keyword_status IN ('PENDING','PROCESSING'))""").fetchall()
    assert left == []
