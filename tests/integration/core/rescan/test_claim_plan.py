"""The claim and the finalizer are planned on the partial rescan index (SPEC §2.2, §7)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from pinlog.core.rescan import expiry_params, statements


def _index_names(plan: dict) -> set[str]:
    names = set()
    if "Index Name" in plan:
        names.add(plan["Index Name"])
    for child in plan.get("Plans", []):
        names |= _index_names(child)
    return names


@pytest.mark.parametrize("name", ["claim", "finalize_exhausted", "finalize_dead_ends"])
async def test_statement_uses_the_partial_rescan_index(sync_conn, engine, make_rescan_config,
                                                       name):
    sync_conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, updated_at)"
        " SELECT g, 'COMPLETED', CASE WHEN g % 2 = 0 THEN 'COMPLETED' ELSE 'CANCELLED' END,"
        " now() - interval '1 day' FROM generate_series(1, 20000) AS g")
    sync_conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, updated_at)"
        " SELECT g, now() - interval '1 hour' FROM generate_series(20001, 20020) AS g")
    sync_conn.execute("ANALYZE ai.context_ai_state")
    params = expiry_params(make_rescan_config())
    async with engine.connect() as conn:
        plan = (await conn.execute(text("EXPLAIN (FORMAT JSON) " + statements().sql(name)),
                                   params)).scalar_one()
        await conn.rollback()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    assert "context_ai_state_rescan_idx" in _index_names(plan[0]["Plan"]), plan


async def test_the_claim_finds_released_rows_through_the_owner_index(sync_conn, engine,
                                                                      make_rescan_config):
    """SPEC §7.3.1: the claim's second scan (rows of gone owners) goes through
    context_ai_state_owner_idx — O(rows of the gone processes), not O(unfinished rows) — while
    the expiry scan keeps the partial rescan index."""
    from tests.support.owners import add_process

    gone, live = add_process(sync_conn, live=False), add_process(sync_conn)
    sync_conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, updated_at)"
        " SELECT g, 'COMPLETED', 'COMPLETED', now() - interval '1 day'"
        " FROM generate_series(1, 20000) AS g")
    sync_conn.execute(  # a live process's backlog: unfinished, owned, young
        "INSERT INTO ai.context_ai_state (context_id, updated_at, owner, owned_at)"
        " SELECT g, now(), %s, now() FROM generate_series(20001, 22000) AS g", (live,))
    sync_conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, updated_at, owner, owned_at)"
        " SELECT g, now(), %s, now() FROM generate_series(22001, 22010) AS g", (gone,))
    sync_conn.execute("ANALYZE ai.context_ai_state")
    sync_conn.execute("ANALYZE ai.process_settings")
    async with engine.connect() as conn:
        plan = (await conn.execute(text("EXPLAIN (FORMAT JSON) " + statements().sql("claim")),
                                   expiry_params(make_rescan_config()))).scalar_one()
        await conn.rollback()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    names = _index_names(plan[0]["Plan"])
    assert {"context_ai_state_rescan_idx", "context_ai_state_owner_idx"} <= names, plan
