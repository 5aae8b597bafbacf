"""Issue 13 item 3 through the real `pinlog serve` and a real (embedded) PostgreSQL that is
stopped and started under it: every API answers JSON 503 with Retry-After (never a bare 500),
/metrics keeps answering with the last database gauges and `pinlog_db_up 0`, the log line names
method, path and request id; once the database is back everything recovers by itself.
Plus an unexpected bug in a route: JSON 500, logged with its traceback, no body or secret."""

from __future__ import annotations

import json
import logging
import re
import time

import httpx
import pytest

from pinlog.core.api.auth import issue_token
from tests.support.fake_openai import FakeOpenAI
from tests.support.serve import Server, serve_env
from tests.conftest import TEST_SECRET, make_settings, config_of
from tests.helpers import free_port, run_pinlog

pytestmark = pytest.mark.slow


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    assert match, f"{name} missing"
    return float(match.group(1))


def poll(check, what: str, timeout: float = 60) -> None:
    """Poll an external process (the server, the database) until ``check()`` is true."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_database_stopped_under_a_running_server(tmp_path):
    fake = FakeOpenAI().start()
    data = tmp_path / "dbdata"
    db_env = {"PINLOG_DATA_DIR": str(data)}
    server = None
    try:
        env = serve_env(tmp_path, "", free_port(), fake)
        env.pop("PINLOG_DATABASE_URL")
        env["PINLOG_DATA_DIR"] = str(data)  # the embedded server of this data dir
        started = run_pinlog(["db", "start"], {**env, **db_env}, timeout=120)
        assert started.returncode == 0, started.stderr
        for args in (["migrate"], ["presets", "load"]):
            result = run_pinlog(args, env, timeout=120)
            assert result.returncode == 0, result.stderr[-2000:]
        server = Server(env, tmp_path, "serve")
        server.wait_ready()
        settings = make_settings(tmp_path, None, data_dir=data)
        import psycopg

        url = run_pinlog(["db", "url"], env).stdout.strip()
        assert url.startswith("postgresql://")
        with psycopg.connect(started.stdout.split(": ", 1)[1].strip(), autocommit=True) as conn:
            member = conn.execute(
                "INSERT INTO core.member (external_ref) VALUES ('outage') RETURNING id").fetchone()[0]
        auth = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, member)}"}
        base = server.url
        created = httpx.post(f"{base}/v1/records", headers=auth, timeout=10, json={
            "place": {"externalPlaceId": "p-1", "name": "다방", "lat": 37.5, "lng": 127.0},
            "text": "비 오는 날 조용한 다방"})
        assert created.status_code == 201, created.text
        # a healthy database is read: on a loaded machine one gauge read may exceed its 3 s
        # budget (then that answer says pinlog_db_up 0), so wait for a read that succeeds
        reads: list[str] = []

        def healthy_read() -> bool:
            reads.append(httpx.get(f"{base}/metrics", timeout=10).text)
            return metric(reads[-1], "pinlog_db_up") == 1

        poll(healthy_read, "a /metrics read with pinlog_db_up 1")
        before = reads[-1]
        rows_before = sum(float(v) for v in re.findall(
            r'^pinlog_state_rows\{stage="embedding",status="[A-Z]+"\} ([0-9.]+)$', before, re.M))
        assert rows_before == 1

        # --force: the server uses it (issue 27 #11 refuses without)
        stopped = run_pinlog(["db", "stop", "--force"], {**env, **db_env}, timeout=60)
        assert "stopped" in stopped.stdout, stopped.stderr

        calls = [
            ("GET", "/v1/records", None, auth),
            ("POST", "/v1/records", {"place": {"externalPlaceId": "p-2", "name": "카페",
                                               "lat": 37.5, "lng": 127.0},
                                     "text": "창가 자리"}, auth),
            ("GET", "/v1/me", None, auth),
            ("POST", "/v1/search", {"query": "조용한 곳"}, auth),
            ("POST", "/internal/v1/search", {"userId": member, "query": "조용한 곳",
                                             "embeddingProfile": env["PINLOG_EMBEDDING_PROFILE"]},
             {"X-Internal-Secret": TEST_SECRET}),
        ]
        for method, path, body, headers in calls:
            r = httpx.request(method, f"{base}{path}", json=body, timeout=30,
                              headers={**headers, "X-Request-Id": f"outage-{path}"})
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/json"), path
            assert r.json()["error"] in ("DATABASE_UNAVAILABLE", "SEARCH_UNAVAILABLE"), r.text
            assert int(r.headers["retry-after"]) > 0 or r.json()["error"] != \
                "DATABASE_UNAVAILABLE", path
        assert httpx.get(f"{base}/ready", timeout=10).status_code == 503
        during = httpx.get(f"{base}/metrics", timeout=30)
        assert during.status_code == 200
        assert metric(during.text, "pinlog_db_up") == 0
        # the database gauges keep their last successful values
        assert re.search(r'^pinlog_state_rows\{stage="embedding",status="[A-Z]+"\} 1\.0$',
                         during.text, re.M)

        restarted = run_pinlog(["db", "start"], {**env, **db_env}, timeout=120)
        assert restarted.returncode == 0, restarted.stderr
        poll(lambda: httpx.get(f"{base}/ready", timeout=10).status_code == 200, "/ready")
        assert httpx.get(f"{base}/v1/records", headers=auth, timeout=10).status_code == 200
        assert metric(httpx.get(f"{base}/metrics", timeout=10).text, "pinlog_db_up") == 1
    finally:
        if server is not None:
            server.proc.terminate()
            server.proc.wait(30)
            server.close()
        run_pinlog(["db", "stop"], {"PINLOG_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"},
                   timeout=60)
        fake.stop()
    lines = [json.loads(line) for line in server.err_path.read_text().splitlines()
             if line.startswith("{")]
    outage = [r for r in lines if r["msg"] == "database unavailable: answered 503"]
    assert {r["path"] for r in outage} >= {"/v1/records", "/v1/me"}
    assert all(r["method"] in ("GET", "POST") and r["request_id"].startswith("outage-")
               for r in outage)
    log_text = server.err_path.read_text()
    assert "창가 자리" not in log_text and TEST_SECRET not in log_text
    assert "Internal Server Error" not in log_text


async def test_an_unexpected_error_is_json_500_logged_with_traceback(tmp_path, caplog):
    from pinlog.app import create_app

    # no lifespan runs under the ASGI transport: no database is needed
    app = create_app(make_settings(tmp_path), components=("core",))

    @app.get("/v1/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    transport = httpx.ASGITransport(app=app)
    caplog.set_level(logging.ERROR, logger="pinlog.http")
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        r = await client.get("/v1/boom", headers={"X-Request-Id": "req-42"})
    assert r.status_code == 500
    assert r.json() == {"error": "INTERNAL", "message": "internal error"}
    assert r.headers["x-request-id"] == "req-42"
    [record] = [r for r in caplog.records if r.msg == "unhandled error"]
    assert (record.method, record.path, record.request_id) == ("GET", "/v1/boom", "req-42")
    from pinlog.logs import JsonFormatter

    line = json.loads(JsonFormatter().format(record))
    assert "RuntimeError: a bug" in line["traceback"] and line["path"] == "/v1/boom"
