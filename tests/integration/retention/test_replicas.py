"""Issue 31: the retention job under two replicas. Two purgers (each its own engine, as two
processes) run at once: one is held in the middle of a batch of a given step — its rows locked,
its transaction open — while the other runs a whole purge. No error, nothing purged twice (the
two reports add up to exactly what a dry run counted), nothing live touched; the held purger
then finishes what is left. Ordered with events, never sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from pinlog.composition import retention_parts
from pinlog.db.engine import create_engine
from pinlog.db.retention import purge_all
from tests.conftest import config_of
from tests.integration.ai.support import ai_settings_for
from tests.integration.retention.support import (
    build_world,
    rows_of,
    set_back,
    set_events_back,
)

DAY = 86400.0
#: Longest a held purger waits for the other one (a purger that blocks on the held rows
#: instead of skipping them never finishes: the held one gives up and the test fails).
HOLD_TIMEOUT = 15.0


#: The table each held step purges.
TABLE_OF = {"contexts": "ai.context_ai_state", "events": "ai.context_ai_event",
            "core.context": "core.context", "core.record": "core.record",
            "core.member": "core.member"}


@pytest.mark.parametrize("held", [*TABLE_OF, None])
async def test_two_purgers_at_once_share_the_work(held, tmp_path, db_url, core, pipeline,
                                                  sync_conn):
    config = config_of(ai_settings_for(tmp_path, db_url, retention_batch_size=2))
    worlds = [await build_world(core, pipeline, tag=t) for t in ("a", "b", "c")]
    dead = [cid for w in worlds for cid in w.dead_ids]
    live = [cid for w in worlds for cid in w.live_ids]
    set_back(sync_conn, 31 * DAY)
    set_events_back(sync_conn, 91 * DAY, context_ids=dead)
    engine_a = create_engine(db_url, pool_size=4)
    engine_b = create_engine(db_url, pool_size=4)
    try:
        expected = (await purge_all(retention_parts(config, engine_a), dry_run=True)).removed
        assert all(expected[t] > config.ai.retention.batch_size for t in TABLE_OF.values())
        live_before = rows_of(sync_conn, live)
        a_holding, b_done = asyncio.Event(), asyncio.Event()
        held_batches: list[Sequence[int]] = []

        async def hold(step: str, ids: Sequence[int]) -> None:
            if step == held and not held_batches:
                held_batches.append(ids)
                a_holding.set()
                await asyncio.wait_for(b_done.wait(), HOLD_TIMEOUT)

        async def run_a():
            try:
                return await purge_all(retention_parts(config, engine_a, on_batch=hold))
            finally:
                a_holding.set()

        async def run_b():
            if held is not None:
                await a_holding.wait()
            try:
                return await purge_all(retention_parts(config, engine_b))
            finally:
                b_done.set()

        a, b = await asyncio.gather(run_a(), run_b())
    finally:
        await engine_a.dispose()
        await engine_b.dispose()

    if held is not None:
        assert held_batches, "the held purger never reached its step"
        # the other one purged rows of the same step while those were held: it skipped them
        assert b.removed[TABLE_OF[held]] > 0
    assert {t: a.removed[t] + b.removed[t] for t in expected} == expected
    assert rows_of(sync_conn, live) == live_before
    left = rows_of(sync_conn, dead)
    assert {t: r for t, r in left.items() if r} == {}
