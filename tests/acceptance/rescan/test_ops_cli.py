"""`pinlog rescan [--once]`, `pinlog reprocess`, `pinlog status` as real subprocesses, sending
over HTTP (PINLOG_AI_BASE_URL) to a local receiver standing in for the ai side."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pinlog.contracts import PROCESS_BATCH_PATH, PROCESS_PATH, SECRET_HEADER
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.helpers import PINLOG, pinlog_env, run_pinlog
from tests.integration.core.rescan.factory import make_context, state

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver():
    """A tiny HTTP ai side speaking the process contract: records (path, secret header, body)
    of each context sent — one per ``process`` call, one per item of a ``process-batch`` call —
    and accepts them (202; a batch: one 202 status per item)."""
    seen: list[tuple[str, str | None, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            items = body["contexts"] if self.path == PROCESS_BATCH_PATH else [body]
            for item in items:
                seen.append((self.path, self.headers.get(SECRET_HEADER), item))
            answer = (json.dumps({"statuses": [202] * len(items)}).encode()
                      if self.path == PROCESS_BATCH_PATH else b"")
            self.send_response(202)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def env_for(tmp_path, db_url, ai_url: str, **extra: str) -> dict:
    return pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url, PINLOG_AI_BASE_URL=ai_url,
                      PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                      COLUMNS="200", **extra)


def test_rescan_once_prints_what_it_finalized_claimed_and_dispatched(
        tmp_path, db_url, sync_conn, receiver):
    url, seen = receiver
    stale = make_context(sync_conn, body="조용한 북카페", age_s=10_000)
    exhausted = make_context(sync_conn, age_s=10_000, retry=3)
    fresh = make_context(sync_conn)

    result = run_pinlog(["rescan", "--once"], env_for(tmp_path, db_url, url), timeout=60)

    assert result.returncode == 0, result.stderr
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines()
             if line.count("│") >= 3}
    assert str(exhausted) in lines["finalized FAILED (retries exhausted)"]
    assert str(stale) in lines["claimed (retry spent)"]
    assert str(stale) in lines["dispatched (accepted)"]
    assert [(p, s, b["contextId"], b["text"]) for p, s, b in seen] == [
        (PROCESS_BATCH_PATH, TEST_SECRET, stale, "조용한 북카페")]  # the batch path
    assert state(sync_conn, stale)["retry_count"] == 1
    assert state(sync_conn, fresh)["retry_count"] == 0
    assert "조용한" not in result.stderr  # logs never carry the text


def test_rescan_loop_runs_until_sigterm(tmp_path, db_url, sync_conn, receiver):
    url, seen = receiver
    stale = make_context(sync_conn, age_s=10_000)
    proc = subprocess.Popen(PINLOG + ["rescan"], env=env_for(tmp_path, db_url, url,
                                                             PINLOG_RESCAN_INTERVAL="3600"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not seen:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
        assert seen[0][2]["contextId"] == stale
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]


def test_status_shows_the_picture(tmp_path, db_url, sync_conn, receiver):
    url, _ = receiver
    make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    make_context(sync_conn, retry=3, age_s=30)
    make_context(sync_conn, emb="FAILED", kw="FAILED",
                 last_error="embedding permanent: wrong vector length")
    make_context(sync_conn, emb="CANCELLED", kw="PENDING")  # an anomaly (SPEC §7.2)

    result = run_pinlog(["status"], env_for(tmp_path, db_url, url), timeout=60)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in ("state rows", "retry_count", "exhausted but unfinished", "recent failures",
                     "embedding permanent: wrong vector length", "oldest unfinished"):
        assert expected in out
    exhausted_line = next(line for line in out.splitlines() if "exhausted but" in line)
    assert exhausted_line.rstrip(" │").endswith("1")
    assert "anomalies by kind" in out
    half_line = next(line for line in out.splitlines() if "half_cancelled" in line)
    assert [c.strip() for c in half_line.split("│")][1:3] == ["half_cancelled", "1"]


def test_reprocess_profile_dry_run_then_run(tmp_path, db_url, sync_conn, receiver):
    url, seen = receiver
    cid = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    sync_conn.execute(
        "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
        "embedding_profile, text_sha256) SELECT id, member_id, record_id, '[1,0]', "
        "'some-old-profile-v0', sha256('x'::bytea) FROM core.context WHERE id = %s", (cid,))
    env = env_for(tmp_path, db_url, url)

    usage = run_pinlog(["reprocess"], env, timeout=60)
    assert usage.returncode == 2

    dry = run_pinlog(["reprocess", "--profile", "--dry-run"], env, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "1 context(s) would be reprocessed" in dry.stdout
    assert state(sync_conn, cid)["embedding_status"] == "COMPLETED" and not seen

    run = run_pinlog(["reprocess", "--profile", "--batch-size", "10"], env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "1 context(s) moved to PENDING" in run.stdout
    row = state(sync_conn, cid)
    assert (row["embedding_status"], row["keyword_status"]) == ("PENDING", "PENDING")
    assert [b["contextId"] for _, _, b in seen] == [cid]


def test_rescan_once_with_the_in_process_ai_side_finishes_the_work(tmp_path, db_url, sync_conn,
                                                                   fake_openai):
    """No PINLOG_AI_BASE_URL: the command runs the ai side in-process and waits for its jobs."""
    env = pinlog_env(
        tmp_path / "data", PINLOG_DATABASE_URL=db_url, PINLOG_INTERNAL_SECRETS=TEST_SECRET,
        PINLOG_JWT_SECRET=TEST_JWT_SECRET, **fake_openai.env("fake-openai-8-cosine-raw-v1", judge=False),
        PINLOG_EMBEDDING_TIMEOUT="5", PINLOG_LLM_TIMEOUT="5", COLUMNS="200")
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    stale = make_context(sync_conn, body="친구들과 늦게까지 수다 떨기 좋은 술집", age_s=10_000)

    result = run_pinlog(["rescan", "--once"], env, timeout=120)

    assert result.returncode == 0, result.stderr[-3000:]
    row = state(sync_conn, stale)
    assert (row["embedding_status"], row["keyword_status"], row["retry_count"]) == (
        "COMPLETED", "COMPLETED", 1)
    assert fake_openai.embedded_texts.count("친구들과 늦게까지 수다 떨기 좋은 술집") == 1


def test_a_commands_lines_carry_the_command_the_round_and_the_request_id_it_sent(
        tmp_path, db_url, sync_conn):
    """pinlog.logs, set once per edge: the CLI command (``command``), the rescan round
    (``round_id``) and the re-send (``request_id``, sent as X-Request-Id) — no parameter."""
    from tests.integration.core.support import Receiver

    stale = make_context(sync_conn, body="조용한 북카페", age_s=10_000)
    with Receiver(mode=500) as ai_side:
        result = run_pinlog(["rescan", "--once"], env_for(tmp_path, db_url, ai_side.url),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    # the receiver knows only /process (an ai side without process-batch): the re-send asks
    # for the batch route once, then sends the context on its own
    [received] = [r for r in ai_side.received if r.path == PROCESS_PATH]
    lines = [json.loads(raw) for raw in result.stderr.splitlines() if raw.startswith("{")]
    [line] = [x for x in lines if x["logger"] == "pinlog.core.dispatch" and "outcome" in x]
    assert (line["context_id"], line["outcome"], line["command"]) == (stale, "server_error", "rescan")
    assert line["request_id"] == received.headers["X-Request-Id"]
    assert line["request_id"].startswith("rescan-") and len(line["round_id"]) == 16
    assert "조용한" not in result.stderr
