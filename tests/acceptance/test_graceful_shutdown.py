"""Issue 13 item 2 through the real `pinlog serve`: on SIGTERM it stops accepting, running stages
get PINLOG_SHUTDOWN_GRACE to finish, and what is left is logged (and recovered by the rescan).
The model (a local OpenAI-compatible fake) holds the embedding call on an Event, so the test
decides whether the running stage finishes inside the grace — no sleeps as ordering."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from tests.support.serve import Server, create_context, serve_env
from tests.helpers import free_port, run_pinlog
from tests.integration.core.rescan.factory import state

pytestmark = pytest.mark.slow


def log_lines(server: Server) -> list[dict]:
    return [json.loads(line) for line in server.err_path.read_text().splitlines()
            if line.startswith("{")]


def wait_for_log(server: Server, msg: str, timeout: float = 30) -> dict:
    """Poll the server's log file (an external process) for a line, with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in log_lines(server) if r["msg"].startswith(msg)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, server.err_path.read_text()[-3000:]
        time.sleep(0.1)


async def start_held(tmp_path, db_url, sync_conn, fake, grace: str) -> tuple[Server, int]:
    """A server with ``PINLOG_SHUTDOWN_GRACE=grace`` whose one context's embedding call is held
    by the model; the call may wait up to 20 s (budget: one attempt, 60 s processing expiry)."""
    env = serve_env(tmp_path, db_url, free_port(), fake, PINLOG_SHUTDOWN_GRACE=grace,
                    PINLOG_EMBEDDING_TIMEOUT="20", PINLOG_MODEL_ATTEMPTS="1",
                    PINLOG_PROCESSING_EXPIRY="60")
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    fake.hold_embeddings.set()
    server = Server(env, tmp_path, "serve")
    server.wait_ready()
    context_id = create_context(sync_conn, tmp_path, db_url, server.url)
    assert await asyncio.to_thread(fake.entered.wait, 30)  # the stage is running in the model
    return server, context_id


async def test_sigterm_lets_the_running_stage_finish_within_the_grace(
        tmp_path, db_url, sync_conn, fake_openai):
    server, context_id = await start_held(tmp_path, db_url, sync_conn, fake_openai, grace="60")
    try:
        server.proc.send_signal(signal.SIGTERM)
        waiting = wait_for_log(server, "shutdown: waiting for running jobs")
        assert waiting["count"] == 1 and waiting["seconds"] == 60
        fake_openai.release.set()  # the model answers while the server is shutting down
        assert await asyncio.to_thread(server.proc.wait, 60) == 0
    finally:
        server.close()
    row = state(sync_conn, context_id)
    assert (row["embedding_status"], row["keyword_status"]) == ("COMPLETED", "COMPLETED")
    assert not [r for r in log_lines(server) if r["msg"].startswith("shutdown grace over")]


async def test_what_the_grace_cannot_finish_is_logged_and_left_to_the_rescan(
        tmp_path, db_url, sync_conn, fake_openai):
    server, context_id = await start_held(tmp_path, db_url, sync_conn, fake_openai, grace="1")
    try:
        server.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.proc.wait, 60) == 0  # the model never answered
    finally:
        server.close()
    left = [r for r in log_lines(server) if r["msg"].startswith("shutdown grace over")]
    assert [r["count"] for r in left] == [1]
    row = state(sync_conn, context_id)
    assert row["embedding_status"] == "PROCESSING"  # not lost: re-claimed after the expiry
