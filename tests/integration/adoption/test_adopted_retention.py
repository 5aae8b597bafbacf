"""Issue 31 on an adopted database (the reference backend owns ``core``): the retention job
touches only what our side owns — the ai rows of contexts the backend cancelled, past the
retention and the late-result window, and our old history rows. Core's part is off: every
table outside ``ai`` (columns, rows, constraints, indexes, the backend's version table) is
exactly as before, and an erasure request is refused (it goes through the backend)."""

from __future__ import annotations

import psycopg
import pytest

from pinlog.composition import erase_member, retention_parts
from pinlog.core.retention import OFF_ADOPTED, CoreNotOurs
from pinlog.db import migrate
from pinlog.db.engine import create_engine
from pinlog.db.retention import purge_all
from tests.conftest import config_of
from tests.integration.adoption.reference import REF_DIM, REF_PROFILE, backend_snapshot
from tests.integration.ai.support import ai_settings_for


def _ai_rows(conn: psycopg.Connection) -> dict[str, list]:
    return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in (
        "ai.context_ai_state", "ai.context_embedding", "ai.context_keyword",
        "ai.context_keyword_analysis")}


async def test_on_an_adopted_database_only_our_ai_rows_are_purged(reference_url, tmp_path):
    migrate.adopt(reference_url, REF_DIM)
    config = config_of(ai_settings_for(tmp_path, reference_url, embedding_profile=REF_PROFILE,
                                       embedding_dimension=REF_DIM))
    with psycopg.connect(reference_url, autocommit=True) as conn:
        # the backend cancelled context 4 (a deleted note) 31 days ago — it keeps the note
        # itself in its own core.context_note; context 3 is live (COMPLETED) and as old
        conn.execute("UPDATE ai.context_ai_state SET updated_at = now() - interval '31 days' "
                     "WHERE context_id IN (3, 4)")
        conn.execute("INSERT INTO ai.context_ai_event (context_id, stage, from_status, "
                     "to_status, actor, reason, at) VALUES "
                     "(3, 'embedding', 'PENDING', 'PROCESSING', 'ai', 'started', "
                     " now() - interval '91 days'), "
                     "(3, 'embedding', 'PROCESSING', 'COMPLETED', 'ai', 'completed', now())")
        backend_before = backend_snapshot(conn)
        ai_before = _ai_rows(conn)
    engine = create_engine(reference_url, pool_size=2)
    try:
        dry = await purge_all(retention_parts(config, engine), dry_run=True)
        report = await purge_all(retention_parts(config, engine))
        with pytest.raises(CoreNotOurs, match="backend"):
            await erase_member(config, engine, "id:1")
    finally:
        await engine.dispose()

    assert report.off == dry.off == [OFF_ADOPTED]
    assert report.removed == dry.removed == {
        "ai.context_embedding": 1, "ai.context_keyword": 0, "ai.context_keyword_analysis": 0,
        "ai.context_ai_state": 1, "ai.context_ai_event": 1}
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert backend_snapshot(conn) == backend_before
        after = _ai_rows(conn)
        assert [r[0] for r in conn.execute("SELECT reason FROM ai.context_ai_event").fetchall()] \
            == ["completed"]
    # only context 4's rows went; every other context's ai rows are untouched
    assert after == {t: [r for r in rows if r[0] != 4] for t, rows in ai_before.items()}
