"""SPEC §7.3.1 "graceful shutdown hands work back", through real `pinlog serve` subprocesses on
the test database, with the DEFAULT expiries (PENDING 5 min, PROCESSING 10 min) and interval
(5 min): a server stopped with SIGTERM while one job runs (its model call held) and more wait in
its queue ends its heartbeat lease after its components stopped, so every row it leaves — the
queued ones still PENDING, the running one PROCESSING — is re-sent at once: by a live replica
(it notices within one heartbeat timeout, its loop wakes when the stopped process's lease would
have run out) and by the same server restarted (its start-up round). Without the hand-back they
would wait for the expiries.

Orderings: the model holds the running job's call on an Event; the servers are external
processes, so completion is polled with a deadline far below the expiries.
"""

from __future__ import annotations

import asyncio
import signal

import httpx
import pytest

from pinlog.core.api.auth import issue_token
from tests.conftest import config_of, make_settings
from tests.helpers import free_port, run_pinlog
from tests.support.serve import Server, serve_env, wait_for

pytestmark = pytest.mark.slow

DEFAULTS = {"PINLOG_PROCESSING_EXPIRY": "600", "PINLOG_PENDING_EXPIRY": "300",
            "PINLOG_RESCAN_INTERVAL": "300"}
#: one job at a time, so the rest of the notes wait in the queue; a short grace; the held call
#: may wait a minute (one attempt; budget 60 s < the 600 s expiry) so it never times out first
MODEL = {"PINLOG_EMBEDDING_TIMEOUT": "60", "PINLOG_MODEL_ATTEMPTS": "1"}
STOPPING = {"PINLOG_WORKER_CONCURRENCY": "1", "PINLOG_SHUTDOWN_GRACE": "1", **MODEL}
NOTES = 4


def member_token(sync_conn, tmp_path, db_url) -> str:
    """A bearer token of a new member."""
    member = sync_conn.execute(
        "INSERT INTO core.member (external_ref) VALUES ('handback') RETURNING id").fetchone()[0]
    return issue_token(config_of(make_settings(tmp_path, db_url)).core.auth, member)


def create_notes(token: str, url: str, n: int, first: int = 0) -> list[int]:
    """Create the member's notes ``first`` .. ``first + n - 1``; their context ids."""
    ids = []
    for i in range(first, first + n):
        r = httpx.post(f"{url}/v1/records", timeout=10, headers={"Authorization": f"Bearer {token}"},
                       json={"place": {"externalPlaceId": f"hb-{i}", "name": f"카페 {i}",
                                       "lat": 37.5, "lng": 127.0},
                             "text": f"조용한 카페 {i}, 비 오는 날"})
        assert r.status_code == 201, r.text
        ids.append(r.json()["contextId"])
    return ids


async def stop_with_work_left(tmp_path, db_url, sync_conn, fake, env,
                              replica: str | None = None) -> tuple[list[int], str]:
    """Serve, hold the model, create NOTES notes (one runs, the rest queue), SIGTERM; returns
    (context ids, the stopped process's id) once it exited. With a live ``replica`` (its process
    id), a row may already have been taken by it while the stopped process was exiting (its
    lease ended before its exit): such a row must be the replica's, re-sent once."""
    fake.hold_embeddings.set()
    server = Server({**env, **STOPPING}, tmp_path, "stopped")
    try:
        server.wait_ready()
        (process_id,) = sync_conn.execute(
            "SELECT process_id FROM ai.process_settings WHERE pid = %s",
            (server.proc.pid,)).fetchone()
        # the first note's job runs (its model call held) before the others arrive, so they
        # wait in the queue behind it (a worker that found them waiting would take them all
        # as one batch)
        token = member_token(sync_conn, tmp_path, db_url)
        ids = create_notes(token, server.url, 1)
        assert await asyncio.to_thread(fake.entered.wait, 30)
        ids += create_notes(token, server.url, NOTES - 1, first=1)
        server.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(server.proc.wait, 60) == 0
    finally:
        server.close()
    rows = sync_conn.execute(
        "SELECT embedding_status, owner, retry_count FROM ai.context_ai_state "
        "WHERE context_id = ANY(%s) ORDER BY context_id", (ids,)).fetchall()
    taken = [r for r in rows if replica is not None and r[1] == replica]
    assert all(r[2] == 1 for r in taken), rows  # taken over by the replica: re-sent once
    left = [r for r in rows if r not in taken]
    # left behind: one PROCESSING, the rest PENDING — all this process's work, nothing spent
    if not taken:
        assert sorted(r[0] for r in left) == ["PENDING"] * (NOTES - 1) + ["PROCESSING"], rows
    assert {r[1] for r in left} <= {process_id} and {r[2] for r in left} <= {0}, rows
    assert {r[0] for r in left} <= {"PENDING", "PROCESSING"}, rows
    (lease_left,) = sync_conn.execute(
        "SELECT extract(epoch FROM alive_until - now()) FROM ai.process_settings "
        "WHERE process_id = %s", (process_id,)).fetchone()
    assert lease_left <= 0  # the clean stop ended its lease: its work is released
    fake.hold_embeddings.clear()
    fake.release.set()  # the model answers normally from now on
    return ids, process_id


def all_completed(sync_conn, ids: list[int]):
    def check() -> bool:
        (n,) = sync_conn.execute(
            "SELECT count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) AND "
            "embedding_status = 'COMPLETED' AND keyword_status = 'COMPLETED'", (ids,)).fetchone()
        return n == len(ids)
    return check


def assert_resent_once_by(sync_conn, ids: list[int], claimer: str) -> None:
    rows = sync_conn.execute("SELECT retry_count, owner FROM ai.context_ai_state "
                             "WHERE context_id = ANY(%s)", (ids,)).fetchall()
    assert {r[0] for r in rows} == {1}  # each re-sent once by the rescan
    assert {r[1] for r in rows} == {claimer}  # … of this process, which then ran the stages


async def test_sigterm_hands_queued_and_running_work_to_a_live_replica(
        tmp_path, db_url, sync_conn, fake_openai):
    env = serve_env(tmp_path, db_url, free_port(), fake_openai, **DEFAULTS,
                    PINLOG_HEARTBEAT_TIMEOUT="6")
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    # the replica's model settings are the stopped process's (replicas agree on them): a row it
    # takes over while the stopped process is still exiting meets the held model and waits for
    # the release instead of timing out within a 0.5 s budget (then left for the 300 s rescan)
    replica = Server({**env, **MODEL, "PINLOG_PORT": str(free_port())}, tmp_path, "replica")
    try:
        replica.wait_ready()
        (replica_id,) = sync_conn.execute(
            "SELECT process_id FROM ai.process_settings WHERE pid = %s",
            (replica.proc.pid,)).fetchone()
        ids, _ = await stop_with_work_left(tmp_path, db_url, sync_conn, fake_openai, env,
                                           replica=replica_id)
        # the replica's loop wakes when the stopped process's lease would have ended (≤ 6 s)
        await wait_for(all_completed(sync_conn, ids), "the replica to finish the handed-back "
                       "work", timeout=90, server=replica)
    finally:
        replica.stop()
    assert_resent_once_by(sync_conn, ids, replica_id)


async def test_sigterm_hands_queued_and_running_work_to_the_restarted_server(
        tmp_path, db_url, sync_conn, fake_openai):
    env = serve_env(tmp_path, db_url, free_port(), fake_openai, **DEFAULTS)  # default timeout
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    ids, _ = await stop_with_work_left(tmp_path, db_url, sync_conn, fake_openai, env)
    restarted = Server(env, tmp_path, "restarted")
    try:
        restarted.wait_ready()
        (restarted_id,) = sync_conn.execute(
            "SELECT process_id FROM ai.process_settings WHERE pid = %s",
            (restarted.proc.pid,)).fetchone()
        await wait_for(all_completed(sync_conn, ids), "the restarted server to finish the "
                       "handed-back work", timeout=90, server=restarted)
    finally:
        restarted.stop()
    assert_resent_once_by(sync_conn, ids, restarted_id)
