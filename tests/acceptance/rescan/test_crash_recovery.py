"""SPEC §11 #8 end to end: a worker dies mid-stage; the real rescan of a restarted
`pinlog serve` recovers the context to COMPLETED (the `rescanned_at` fix of SPEC §7.3).

The real `pinlog serve` runs as a subprocess on the test database with short expiries. Its
embedding provider (``openai``) and llm judge talk to a local OpenAI-compatible server that holds
the call on an Event until the test has SIGKILLed the server — no test hook in production code.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from pinlog.core.api.auth import issue_token
from pinlog.core.rescan import RescanLoop
from tests.acceptance.rescan.fake_openai import DIMENSION, FakeOpenAI
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, make_settings
from tests.helpers import PINLOG, free_port, pinlog_env, run_pinlog, wait_http
from tests.integration.rescan.factory import RecordingClient, state

pytestmark = pytest.mark.slow

PROFILE = "fake-openai-8-cosine-raw-v1"
TEXT = "비 오는 날 부모님과 조용히 다녀온 한정식집"
EXPIRY = {"PINLOG_PROCESSING_EXPIRY": "3", "PINLOG_PENDING_EXPIRY": "2",
          "PINLOG_RESCAN_INTERVAL": "1"}



def serve_env(tmp_path: Path, db_url: str, port: int, fake: FakeOpenAI, **extra: str) -> dict:
    return pinlog_env(
        tmp_path / "data",
        PINLOG_DATABASE_URL=db_url, PINLOG_PORT=str(port),
        PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
        PINLOG_EMBEDDING_PROVIDER="openai", PINLOG_EMBEDDING_BASE_URL=fake.base_url,
        PINLOG_EMBEDDING_MODEL="fake-embed", PINLOG_EMBEDDING_PROFILE=PROFILE,
        PINLOG_EMBEDDING_DIMENSION=str(DIMENSION),
        # budget rule (SPEC §6): 0.5 s × 2 attempts + 0.1 s backoff < 3 s processing expiry
        PINLOG_EMBEDDING_TIMEOUT="0.5", PINLOG_LLM_TIMEOUT="0.5", PINLOG_MODEL_ATTEMPTS="2",
        PINLOG_BACKOFF_BASE="0.1", PINLOG_BACKOFF_CAP="0.2",
        PINLOG_CANDIDATE_FLOOR="-1",  # random fake vectors: always give the judge candidates
        PINLOG_LOG_LEVEL="INFO",
        **EXPIRY, **extra,
    )


class Server:
    """A `pinlog serve` subprocess with its output in files (a full pipe never blocks it)."""

    def __init__(self, env: dict, log_dir: Path, name: str) -> None:
        self.env = env
        self.out = open(log_dir / f"{name}.out", "w")  # noqa: SIM115
        self.err_path = log_dir / f"{name}.err"
        self.err = open(self.err_path, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(PINLOG + ["serve"], env=env, stdout=self.out,
                                     stderr=self.err, text=True)
        self.url = f"http://127.0.0.1:{env['PINLOG_PORT']}"

    def wait_ready(self) -> None:
        wait_http(f"{self.url}/health", self.proc, timeout=60)
        deadline = time.monotonic() + 30
        while httpx.get(f"{self.url}/ready", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, self.err_path.read_text()[-3000:]
            time.sleep(0.2)

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no shutdown code runs
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()
        self.err.close()


def create_context(sync_conn: psycopg.Connection, tmp_path: Path, db_url: str, url: str) -> int:
    member_id = sync_conn.execute(
        "INSERT INTO core.member (external_ref) VALUES ('crash-test') RETURNING id").fetchone()[0]
    token = issue_token(make_settings(tmp_path, db_url), member_id)
    response = httpx.post(f"{url}/v1/records", timeout=10, headers={
        "Authorization": f"Bearer {token}"}, json={
        "place": {"externalPlaceId": "kakao-1", "name": "한정식집", "lat": 37.57, "lng": 126.98},
        "text": TEXT})
    assert response.status_code == 201, response.text
    return response.json()["contextId"]


async def wait_for(predicate, what: str, timeout: float = 60, server: Server | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            log = server.err_path.read_text()[-4000:] if server else ""
            raise AssertionError(f"timed out waiting for {what}\n{log}")
        await asyncio.sleep(0.2)


async def crash_and_recover(tmp_path, db_url, sync_conn, engine, fake: FakeOpenAI,
                            hold: str, **extra: str) -> tuple[int, dict]:
    """Run serve, hold the `hold` stage's model call, SIGKILL, check nothing younger than the
    expiry is re-claimed, restart, and wait for both stages COMPLETED. Returns (id, state)."""
    port = free_port()
    env = serve_env(tmp_path, db_url, port, fake, **extra)
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]

    getattr(fake, f"hold_{hold}").set()
    first = Server(env, tmp_path, "serve-1")
    try:
        first.wait_ready()
        context_id = create_context(sync_conn, tmp_path, db_url, first.url)
        entered = await asyncio.to_thread(fake.entered.wait, 30)
        assert entered, first.err_path.read_text()[-3000:]
        first.kill()  # the worker dies mid-stage
    finally:
        first.close()

    stage = "embedding_status" if hold == "embeddings" else "keyword_status"
    row = state(sync_conn, context_id)
    assert row[stage] == "PROCESSING" and row["retry_count"] == 0
    # A PROCESSING stage younger than the expiry is not re-claimed (SPEC §11 #8).
    young = RescanLoop(make_settings(tmp_path, db_url, processing_expiry=3, pending_expiry=2,
                                     embedding_timeout=0.5, llm_timeout=0.5,
                                     model_attempts=2, backoff_base=0.1, backoff_cap=0.2),
                       engine, RecordingClient())
    assert await young.claim() == []
    assert state(sync_conn, context_id)["retry_count"] == 0

    fake.release.set()  # the model answers normally from now on
    fake.hold_embeddings.clear()
    fake.hold_chat.clear()
    second = Server(env, tmp_path, "serve-2")
    try:
        second.wait_ready()

        def done() -> dict | None:
            current = state(sync_conn, context_id)
            assert "FAILED" not in (current["embedding_status"], current["keyword_status"]), \
                current
            finished = (current["embedding_status"], current["keyword_status"]) == (
                "COMPLETED", "COMPLETED")
            return current if finished else None

        final = await wait_for(done, "both stages COMPLETED", server=second)
    finally:
        second.proc.terminate()
        try:
            second.proc.wait(20)
        finally:
            second.close()
    return context_id, final


def assert_recovered_through_the_rescan(sync_conn, context_id: int, final: dict) -> None:
    assert final["retry_count"] >= 1  # the rescan re-sent it (nothing else would)
    rows = sync_conn.execute(
        "SELECT embedding_profile, is_deleted FROM ai.context_embedding WHERE context_id = %s",
        (context_id,)).fetchall()
    assert rows == [(PROFILE, False)]  # exactly one embedding row
    actors = [a for (a,) in sync_conn.execute(
        "SELECT actor FROM ai.context_ai_event WHERE context_id = %s ORDER BY id",
        (context_id,))]
    assert "rescan" in actors and "finalizer" not in actors


async def test_scenario_08_worker_killed_during_embedding_recovers_through_the_rescan(
        tmp_path, db_url, sync_conn, engine, fake_openai):
    context_id, final = await crash_and_recover(tmp_path, db_url, sync_conn, engine,
                                                fake_openai, hold="embeddings")
    assert_recovered_through_the_rescan(sync_conn, context_id, final)
    # the killed call and the recovered one
    assert fake_openai.embedded_texts.count(TEXT) == 2


async def test_scenario_08_worker_killed_during_keyword_judging_recovers_through_the_rescan(
        tmp_path, db_url, sync_conn, engine, fake_openai):
    context_id, final = await crash_and_recover(
        tmp_path, db_url, sync_conn, engine, fake_openai, hold="chat",
        PINLOG_JUDGE="llm", PINLOG_LLM_BASE_URL=fake_openai.base_url,
        PINLOG_LLM_CHAIN="fake-judge")
    assert_recovered_through_the_rescan(sync_conn, context_id, final)
    # partial resume: the stored embedding was reused, only the keyword stage reran
    assert fake_openai.embedded_texts.count(TEXT) == 1
    assert fake_openai.chat_calls == 2
    keywords = sync_conn.execute(
        "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", (context_id,)).fetchone()
    assert keywords[0] == 1  # one pick, not doubled
