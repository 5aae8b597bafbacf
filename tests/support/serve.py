"""The one real-serve runner: a `pinlog serve` subprocess on the test database, its model the
fake OpenAI-compatible server (:mod:`tests.support.fake_openai`), with short expiries.

Used by the subprocess-level acceptance tests (crash recovery, recovery speed, graceful shutdown,
database outage, visibility). Waiting on an external process has no event to wait on, so
:func:`wait_for` and :meth:`Server.wait_ready` poll with a deadline.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from pinlog.core.api.auth import issue_token
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, make_settings, config_of
from tests.helpers import PINLOG, pinlog_env, wait_http
from tests.support.fake_openai import FakeOpenAI

PROFILE = "fake-openai-8-cosine-raw-v1"
TEXT = "비 오는 날 부모님과 조용히 다녀온 한정식집"
EXPIRY = {"PINLOG_PROCESSING_EXPIRY": "3", "PINLOG_PENDING_EXPIRY": "2",
          "PINLOG_RESCAN_INTERVAL": "1"}


def serve_env(tmp_path: Path, db_url: str, port: int, fake: FakeOpenAI, **extra: str) -> dict:
    """Environment of a `pinlog serve` on ``db_url`` and ``port`` whose embedding provider is
    ``fake`` (profile :data:`PROFILE`), with the short :data:`EXPIRY`; ``extra`` wins."""
    return pinlog_env(tmp_path / "data", **{
        "PINLOG_DATABASE_URL": db_url, "PINLOG_PORT": str(port),
        "PINLOG_INTERNAL_SECRETS": TEST_SECRET, "PINLOG_JWT_SECRET": TEST_JWT_SECRET,
        **fake.env(PROFILE, judge=False),
        # budget rule (SPEC §6): 0.5 s × 2 attempts + 0.1 s backoff < 3 s processing expiry
        "PINLOG_EMBEDDING_TIMEOUT": "0.5", "PINLOG_LLM_TIMEOUT": "0.5",
        "PINLOG_MODEL_ATTEMPTS": "2", "PINLOG_BACKOFF_BASE": "0.1", "PINLOG_BACKOFF_CAP": "0.2",
        "PINLOG_CANDIDATE_FLOOR": "-1",  # random fake vectors: always give the judge candidates
        "PINLOG_LOG_LEVEL": "INFO",
        **EXPIRY, **extra,
    })


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
        """Poll ``/health`` then ``/ready`` (60 s, then 30 s); fails with the log's tail."""
        wait_http(f"{self.url}/health", self.proc, timeout=60)
        deadline = time.monotonic() + 30
        while httpx.get(f"{self.url}/ready", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, self.err_path.read_text()[-3000:]
            time.sleep(0.2)

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no shutdown code runs
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (a normal shutdown), wait up to 20 s, then :meth:`close`."""
        self.proc.terminate()
        try:
            self.proc.wait(20)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()
        self.err.close()


def create_context(sync_conn: psycopg.Connection, tmp_path: Path, db_url: str, url: str) -> int:
    """A new member saves :data:`TEXT` through the server's public API; returns the context id."""
    member_id = sync_conn.execute(
        "INSERT INTO core.member (external_ref) VALUES ('crash-test') RETURNING id").fetchone()[0]
    token = issue_token(config_of(make_settings(tmp_path, db_url)).core.auth, member_id)
    response = httpx.post(f"{url}/v1/records", timeout=10, headers={
        "Authorization": f"Bearer {token}"}, json={
        "place": {"externalPlaceId": "kakao-1", "name": "한정식집", "lat": 37.57, "lng": 126.98},
        "text": TEXT})
    assert response.status_code == 201, response.text
    return response.json()["contextId"]


async def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60,
                   server: Server | None = None) -> Any:
    """Poll ``predicate`` (the database an external server writes) until it is truthy and
    return its value; on timeout fail with ``what`` and the server's log tail."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            log = server.err_path.read_text()[-4000:] if server else ""
            raise AssertionError(f"timed out waiting for {what}\n{log}")
        await asyncio.sleep(0.2)
