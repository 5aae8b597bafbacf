"""SPEC §7.2 "Recovery speed" through the real `pinlog serve` (subprocess, real PostgreSQL):
a crash backlog — committed PENDING rows whose dispatch died with the process — is final long
before the default 5-minute interval, because the loop wakes at the first expiry and runs
back-to-back rounds while they claim full batches. And `pinlog rescan --once` explains a
"claimed 0" (rows not expired yet, and when the first expires)."""

from __future__ import annotations

import time

import pytest

from tests.helpers import free_port, run_pinlog
from tests.integration.core.rescan.factory import make_context, make_member
from tests.support.serve import Server, serve_env, wait_for

pytestmark = pytest.mark.slow

BACKLOG = 35
BATCH = 10


async def test_a_crash_backlog_is_final_within_seconds_with_the_default_interval(
        tmp_path, db_url, sync_conn, fake_openai):
    env = serve_env(tmp_path, db_url, free_port(), fake_openai,
                    PINLOG_RESCAN_BATCH_SIZE=str(BATCH))
    env["PINLOG_RESCAN_INTERVAL"] = "300"  # the default: one round per 5 minutes at most
    env["PINLOG_PENDING_EXPIRY"] = "8"
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    member = make_member(sync_conn)
    # the backlog a SIGKILL leaves: committed contexts, PENDING, never dispatched
    ids = [make_context(sync_conn, member_id=member, body=f"노트 {i} 조용한 카페")
           for i in range(BACKLOG)]

    server = Server(env, tmp_path, "serve")
    started = time.monotonic()
    try:
        server.wait_ready()

        def all_final() -> bool:
            (n,) = sync_conn.execute(
                "SELECT count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) AND "
                "embedding_status = 'COMPLETED' AND keyword_status = 'COMPLETED'",
                (ids,)).fetchone()
            return n == BACKLOG

        # 4 batches; without the recovery rules this takes at least one 300 s interval
        await wait_for(all_final, "the backlog to complete", timeout=90, server=server)
        drained = time.monotonic() - started
    finally:
        server.stop()
    assert drained < 90
    claims = dict(sync_conn.execute(
        "SELECT context_id, count(*) FROM ai.context_ai_event WHERE actor = 'rescan' "
        "AND context_id = ANY(%s) GROUP BY context_id", (ids,)).fetchall())
    # every row was recovered by the rescan; a second re-send is allowed only after a fresh
    # PENDING expiry (a loaded machine may not start a re-sent row within it), never a third
    assert set(claims) == set(ids)
    assert max(claims.values()) <= 2, claims


def test_rescan_once_explains_claimed_0(tmp_path, db_url, sync_conn, fake_openai):
    env = serve_env(tmp_path, db_url, free_port(), fake_openai)
    env["PINLOG_PENDING_EXPIRY"] = "300"
    env["PINLOG_PROCESSING_EXPIRY"] = "600"
    env["PINLOG_AI_BASE_URL"] = "http://127.0.0.1:9"  # nothing is sent: nothing is expired
    env["COLUMNS"] = "200"
    make_context(sync_conn, age_s=60)
    make_context(sync_conn, emb="PROCESSING", age_s=60)

    result = run_pinlog(["rescan", "--once"], env, timeout=60)

    assert result.returncode == 0, result.stderr
    assert "2 unfinished row(s) not expired yet" in result.stdout
    assert "the first expires in 4.0 min" in result.stdout, result.stdout
