"""SPEC §7.3.1 through the job (``Pipeline.run``) on the real PostgreSQL, fake models at their
Protocols: a job whose process looked gone while its model call was held loses its claim to
another process's job, and its late result is discarded (never a second result, never a late
overwrite); a job whose database connection is lost mid-save runs the save again when the
database answers — with the same claim, without a second model call, long before any expiry.

Orderings come from the fakes' gates and the server's lock table, never from sleeps.
"""

from __future__ import annotations

import asyncio
import logging

from pinlog.ai.pipeline import Pipeline
from tests.conftest import config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import (DIM, PROFILE, QUIET_TEXT, TEXT_VECTORS, embedding_rows,
                                          events, insert_state, keyword_rows, request, statuses)
from tests.support.owners import add_process, end_lease, owner_of


def _pipeline(ai_settings, engine, owner: str | None, provider=None, judge=None) -> Pipeline:
    return Pipeline(engine, config_of(ai_settings).ai.pipeline,
                    provider or FakeEmbeddingProvider(PROFILE, DIM, vectors=TEXT_VECTORS),
                    judge or FakeJudge(), owner=owner)


async def _a_job_in_its_model_call(ai_settings, engine, sync_conn):
    """Two live processes A and B; A's job for context 1 started and is held in its model call.
    Returns ``(a, b, gate, job task)``."""
    a, b = add_process(sync_conn), add_process(sync_conn)
    slow_model = FakeEmbeddingProvider(PROFILE, DIM, vectors=TEXT_VECTORS)
    first = _pipeline(ai_settings, engine, a, provider=slow_model)
    insert_state(sync_conn, 1)
    gate = slow_model.hold()
    job = asyncio.create_task(first.run(request(1, QUIET_TEXT)))
    await gate.wait_entered()                       # A's job is in its model call
    return a, b, gate, job


async def test_a_job_whose_claim_was_taken_over_discards_its_late_result(
        ai_settings, engine, presets, sync_conn, caplog):
    a, b, gate, late = await _a_job_in_its_model_call(ai_settings, engine, sync_conn)
    assert owner_of(sync_conn, 1)[0] == a
    end_lease(sync_conn, a)                         # … and A stops heartbeating
    second = _pipeline(ai_settings, engine, b)
    result = await second.run(request(1, QUIET_TEXT))  # B re-claims at once and finishes
    assert (result.embedding, result.keyword) == ("completed", "completed")
    stored = embedding_rows(sync_conn, 1)
    picks = keyword_rows(sync_conn, 1)
    with caplog.at_level(logging.INFO, logger="pinlog.ai.pipeline"):
        gate.open()                                 # A's model answers: too late
        outcome = await late
    assert (outcome.embedding, outcome.keyword) == ("discarded", "skipped")
    assert any("claim was taken over" in r.getMessage() and r.levelno == logging.INFO
               for r in caplog.records)
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert embedding_rows(sync_conn, 1) == stored and keyword_rows(sync_conn, 1) == picks
    reasons = [e[4] for e in events(sync_conn, 1) if e[0] == "embedding"]
    assert reasons == ["started", "reclaimed: its owner is gone (no heartbeat)", "completed"]


async def test_a_live_owners_job_is_not_taken_over(ai_settings, engine, presets, sync_conn):
    """Owner alive but slow: a duplicate request at another process stops at the start."""
    a, b, gate, job = await _a_job_in_its_model_call(ai_settings, engine, sync_conn)
    other_model = FakeEmbeddingProvider(PROFILE, DIM, vectors=TEXT_VECTORS)
    duplicate = await _pipeline(ai_settings, engine, b, provider=other_model).run(
        request(1, QUIET_TEXT))
    assert duplicate.embedding == "skipped" and other_model.calls == 0
    gate.open()
    assert (await job).embedding == "completed"


async def test_a_save_that_lost_its_database_connection_runs_again_when_it_answers(
        ai_settings, engine, provider, presets, sync_conn, caplog):
    """The save's connection is terminated while it waits for the state row's lock (a real
    connection loss, SQLSTATE 57P01): the job runs the save again on a new connection as soon as
    the database answers — the same vector, the same claim, one model call, COMPLETED now rather
    than after the processing expiry."""
    me = add_process(sync_conn)
    pipeline = _pipeline(ai_settings, engine, me, provider=provider)
    insert_state(sync_conn, 1)
    gate = provider.hold()
    job = asyncio.create_task(pipeline.run(request(1, QUIET_TEXT)))
    await gate.wait_entered()
    with caplog.at_level(logging.WARNING, logger="pinlog.ai.pipeline"):
        with sync_conn.transaction():
            sync_conn.execute("SELECT 1 FROM ai.context_ai_state WHERE context_id = 1 FOR UPDATE")
            gate.open()
            waiter = await _lock_waiter(sync_conn)  # the save, blocked on the row lock
            sync_conn.execute("SELECT pg_terminate_backend(%s)", (waiter,))
            # the lock is released when this block commits: the retried save then proceeds
        result = await job
    assert (result.embedding, result.keyword) == ("completed", "completed")
    assert provider.calls == 1  # the result was kept, not recomputed
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert any(r.getMessage().startswith("database unavailable; the job waits")
               for r in caplog.records)
    assert [e[4] for e in events(sync_conn, 1) if e[0] == "embedding"] == ["started", "completed"]


async def _lock_waiter(conn, timeout: float = 10.0) -> int:
    """The pid of the backend waiting for a row lock on ai.context_ai_state (polls the server's
    lock table: the event is in another session)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        row = conn.execute(
            "SELECT a.pid FROM pg_stat_activity a WHERE a.datname = current_database() "
            "AND a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() LIMIT 1").fetchone()
        if row is not None:
            return int(row[0])
        assert loop.time() < deadline, "the save never waited for the row lock"
        await asyncio.sleep(0.02)
