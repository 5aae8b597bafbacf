"""`pinlog serve` on the embedded database: /health, /ready, and clean stop (issue 2)."""

from __future__ import annotations

import contextlib
import signal
import subprocess

import httpx
import pytest

from pinlog.db.embedded import EmbeddedDatabase
from tests.helpers import PINLOG, free_port, pinlog_env, run_pinlog, wait_http

pytestmark = pytest.mark.slow


def test_serve_answers_health_and_ready_and_stops_the_database_it_started(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    env = pinlog_env(data, PINLOG_PORT=str(port))
    assert run_pinlog(["migrate"], env).returncode == 0
    loaded = run_pinlog(["presets", "load"], env)  # the ai side refuses to start without presets
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert not EmbeddedDatabase(data).is_running()  # `migrate` stopped what it started

    proc = subprocess.Popen(PINLOG + ["serve"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_http(f"http://127.0.0.1:{port}/health", proc).json() == {"status": "ok"}
        ready = httpx.get(f"http://127.0.0.1:{port}/ready", timeout=10)
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}
        assert "postgres" not in ready.text and "secret" not in ready.text
        assert httpx.get(f"http://127.0.0.1:{port}/docs", timeout=5).status_code == 200
        assert EmbeddedDatabase(data).is_running()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert not EmbeddedDatabase(data).is_running()


def test_commands_join_a_running_server_and_leave_it_running(tmp_path):
    data = tmp_path / "data"
    env = pinlog_env(data)
    started = run_pinlog(["db", "start"], env)
    assert started.returncode == 0, started.stderr
    try:
        assert run_pinlog(["migrate"], env).returncode == 0
        assert EmbeddedDatabase(data).is_running()  # left running
        status = run_pinlog(["db", "status"], env)
        assert status.returncode == 0 and status.stdout.startswith("running")
        url = run_pinlog(["db", "url"], env)
        assert url.stdout.startswith("postgresql://postgres@/pinlog?host=")
    finally:
        assert run_pinlog(["db", "stop"], env).returncode == 0
    assert run_pinlog(["db", "status"], env).returncode == 1


@contextlib.contextmanager
def core_only_serve(data):  # noqa: ANN001, ANN201 - a test helper
    """A core-only `pinlog serve` on the embedded database of ``data``, answering /health:
    yields ``(proc, port, env)``; SIGTERM on exit. (A core-only server needs an ai side to
    dispatch to, issue 13; nothing listens there.)"""
    port = free_port()
    env = pinlog_env(data, PINLOG_PORT=str(port), PINLOG_AI_BASE_URL="http://127.0.0.1:9")
    proc = subprocess.Popen(PINLOG + ["serve", "--components", "core"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        yield proc, port, env
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_ready_is_503_before_migrations(tmp_path):
    with core_only_serve(tmp_path / "data") as (_, port, _):
        assert httpx.get(f"http://127.0.0.1:{port}/ready", timeout=10).status_code == 503


def test_db_start_while_serve_runs_keeps_the_server_after_serve_stops(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    env = pinlog_env(data, PINLOG_PORT=str(port))
    assert run_pinlog(["migrate"], env).returncode == 0
    assert run_pinlog(["presets", "load"], env).returncode == 0
    proc = subprocess.Popen(PINLOG + ["serve"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        assert run_pinlog(["db", "start"], env).returncode == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    try:
        assert EmbeddedDatabase(data).is_running()  # serve started it, but `db start` keeps it
    finally:
        assert run_pinlog(["db", "stop"], env).returncode == 0
    assert not EmbeddedDatabase(data).is_running()


def test_db_url_only_looks_and_db_stop_refuses_under_a_running_serve(tmp_path):
    """Issue 27 #9/#11: `pinlog db url` on a data dir without a server starts and creates
    nothing (one line, exit 1); `pinlog db stop` under a running `pinlog serve` refuses and
    names it (the server keeps answering), and stops it only with --force."""
    data = tmp_path / "data"
    looked = run_pinlog(["db", "url"], pinlog_env(data))
    assert looked.returncode == 1 and "not running" in looked.stderr
    assert not data.exists()  # no cluster, no data dir, no generated secrets

    with core_only_serve(data) as (proc, port, env):
        url = run_pinlog(["db", "url"], env)
        assert url.returncode == 0 and url.stdout.startswith("postgresql://postgres@/pinlog?host=")
        refused = run_pinlog(["db", "stop"], env)
        assert refused.returncode == 1, refused.stdout
        assert f"pid {proc.pid} (pinlog serve)" in refused.stderr and "--force" in refused.stderr
        assert EmbeddedDatabase(data).is_running()
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        status = run_pinlog(["db", "status"], env)
        assert status.returncode == 0 and f"pid {proc.pid} (pinlog serve)" in status.stdout
        forced = run_pinlog(["db", "stop", "--force"], env)
        assert forced.returncode == 0 and "warning: stopping the embedded database" in forced.stderr
        assert not EmbeddedDatabase(data).is_running()


def test_a_port_in_use_is_one_line_before_anything_starts(tmp_path):
    """Issue 27 #11: with the port taken, `pinlog serve` says so in one line and exits 3 —
    without logging "pinlog started" first, and without starting the embedded database."""
    import socket

    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = pinlog_env(data, PINLOG_PORT=str(port), PINLOG_AI_BASE_URL="http://127.0.0.1:9",
                         PINLOG_LOG_LEVEL="INFO")
        result = run_pinlog(["serve", "--components", "core"], env, timeout=120)
    assert result.returncode == 3, result.stderr[-2000:]
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "pinlog started" not in result.stderr and "Traceback" not in result.stderr
    assert not EmbeddedDatabase(data).is_running() and not (data / "pg").exists()
