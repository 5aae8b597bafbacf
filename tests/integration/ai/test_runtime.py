"""``AiRuntime`` start-up checks, readiness and concurrency bounds (SPEC §2.2, §5.1, §5.4)."""

from __future__ import annotations

import asyncio

import pytest

from pinlog.ai.providers import MicroBatcher
from pinlog.ai.runtime import AiRuntime
from pinlog.ai.worker import POOL_RESERVE, db_slots
from pinlog.db.engine import create_engine
from tests.conftest import create_database, config_of
from tests.integration.ai.support import ai_settings_for
from tests.integration.ai.support import insert_state, request, seed_presets, statuses


async def test_refuses_to_start_without_the_ai_tables(tmp_path, pg_server_url, provider, judge):
    url = create_database(pg_server_url, "pinlog_unmigrated")
    engine = create_engine(url, pool_size=2)
    try:
        runtime = AiRuntime(engine, config_of(ai_settings_for(tmp_path, url)).ai, provider=provider, judge=judge)
        with pytest.raises(RuntimeError, match="pinlog migrate"):
            await runtime.start()
    finally:
        await engine.dispose()


async def test_refuses_to_start_with_zero_presets_for_the_profile(ai_settings, engine, provider,
                                                                  judge, sync_conn):
    seed_presets(sync_conn, profile="another-profile")  # presets exist, not for this profile
    runtime = AiRuntime(engine, config_of(ai_settings).ai, provider=provider, judge=judge)
    with pytest.raises(RuntimeError, match="pinlog presets load"):
        await runtime.start()


async def test_ready_needs_presets_and_running_workers(ai_settings, engine, provider, judge,
                                                       presets, sync_conn):
    runtime = AiRuntime(engine, config_of(ai_settings).ai, provider=provider, judge=judge)
    assert not await runtime.ready()
    await runtime.start()
    try:
        assert await runtime.ready()
        assert isinstance(runtime.provider, MicroBatcher)
        assert runtime.profile == provider.profile
        sync_conn.execute("UPDATE ai.keyword_preset SET is_active = false")
        assert not await runtime.ready()
    finally:
        await runtime.stop()
    assert not await runtime.ready()


async def test_builds_judge_from_settings_when_not_given(ai_settings, engine, provider, presets,
                                                         sync_conn):
    runtime = AiRuntime(engine, config_of(ai_settings).ai, provider=provider)
    await runtime.start()
    try:
        insert_state(sync_conn, 1)
        assert await runtime.submit(request(1)) == 202
        await runtime.join()
        assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    finally:
        await runtime.stop()


def test_db_steps_never_exceed_the_pool():
    assert db_slots(10) == 10 - POOL_RESERVE
    assert db_slots(2) == 1


class CountingBatcher(MicroBatcher):
    """A MicroBatcher that sets ``reached`` once ``target`` texts are waiting in it (a single
    job's ``embed`` request, or each text a batch queues at once with ``embed_each``)."""

    def __init__(self, provider, target: int, **kwargs) -> None:
        super().__init__(provider, **kwargs)
        self.waiting = 0
        self.target = target
        self.reached = asyncio.Event()

    async def embed(self, texts, kind):
        self.waiting += 1
        if self.waiting >= self.target:
            self.reached.set()
        return await super().embed(texts, kind)

    def embed_each(self, texts, kind="passage"):
        self.waiting += len(texts)
        if self.waiting >= self.target:
            self.reached.set()
        return super().embed_each(texts, kind)


async def _all_jobs_meet_at_a_held_model_call(runtime, provider, batcher, sync_conn, jobs: int, *,
                                              wait_entered: bool = False) -> None:
    """Hold the model, submit contexts 1..``jobs``, wait until the batcher has seen its target
    number of waiting texts (every running job inside a model call), release, and join."""
    gate = provider.hold()
    for cid in range(1, jobs + 1):
        insert_state(sync_conn, cid)
        assert await runtime.submit(request(cid, f"text {cid}")) == 202
    if wait_entered:
        await gate.wait_entered()
    await asyncio.wait_for(batcher.reached.wait(), 10)
    provider.gate = None
    gate.open()
    await runtime.join()


async def test_concurrent_jobs_are_bounded_and_embeddings_batched(tmp_path, db_url, provider,
                                                                  judge, presets, sync_conn):
    """Many accepted jobs, one at a time per worker (``PINLOG_PROCESS_BATCH_SIZE=1``): at most
    ``job_concurrency`` run at once, and their embedding calls are coalesced by the micro-batcher
    into batched provider calls."""
    settings = ai_settings_for(tmp_path, db_url, worker_concurrency=6, db_pool_size=10,
                               process_batch_size=1)
    engine = create_engine(db_url, pool_size=settings.db_pool_size)
    batcher = CountingBatcher(provider, target=6, batch_size=32, wait_ms=1)
    runtime = AiRuntime(engine, config_of(settings).ai, provider=batcher, judge=judge)
    await runtime.start()
    try:
        await _all_jobs_meet_at_a_held_model_call(runtime, provider, batcher, sync_conn, 20,
                                                  wait_entered=True)  # 6 running jobs wait
    finally:
        await runtime.stop()
        await batcher.aclose()
        await engine.dispose()
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(1, 21))
    assert sum(provider.batches) == 20
    assert max(provider.batches) <= 6  # never more texts in flight than running jobs
    # every job that waited behind the held call went out in the next single batch
    first = provider.batches[0]
    assert first == 6 or provider.batches[1] == 6 - first
    assert len(provider.batches) < 20


async def test_more_jobs_than_connections_while_db_steps_stay_within_the_pool(
        tmp_path, db_url, provider, judge, presets, sync_conn):
    """Jobs waiting on the model hold no connection: 8 jobs wait in the batcher at once on a
    pool of 3, while the connections checked out by the jobs never exceed ``db_slots``."""
    from sqlalchemy import event

    settings = ai_settings_for(tmp_path, db_url, worker_concurrency=8, db_pool_size=3)
    engine = create_engine(db_url, pool_size=settings.db_pool_size)
    out = {"now": 0, "peak": 0}

    @event.listens_for(engine.sync_engine, "checkout")
    def _checkout(*_):  # noqa: ANN002
        out["now"] += 1
        out["peak"] = max(out["peak"], out["now"])

    @event.listens_for(engine.sync_engine, "checkin")
    def _checkin(*_):  # noqa: ANN002
        out["now"] -= 1

    batcher = CountingBatcher(provider, target=8, batch_size=32, wait_ms=1)
    runtime = AiRuntime(engine, config_of(settings).ai, provider=batcher, judge=judge)
    await runtime.start()
    try:
        out["peak"] = 0  # start-up checks are not job steps
        await _all_jobs_meet_at_a_held_model_call(runtime, provider, batcher, sync_conn, 8)
    finally:
        await runtime.stop()
        await batcher.aclose()
        await engine.dispose()
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(1, 9))
    assert out["peak"] <= db_slots(settings.db_pool_size)
