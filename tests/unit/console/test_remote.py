"""The command's view of a running server, without one (issue 29): where the file is, what
makes it stale, the URL a wildcard address is reached at."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pinlog.cli.remote import (SERVER_FILE, database_fingerprint, find_server, listen_url,
                               remove_server_file, write_server_file)
from tests.conftest import make_settings


def test_listen_url():
    assert listen_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert listen_url("0.0.0.0", 81) == "http://127.0.0.1:81"
    assert listen_url("::", 82) == "http://[::1]:82"
    assert listen_url("::1", 83) == "http://[::1]:83"


def test_the_fingerprint_names_the_database_without_revealing_it(tmp_path):
    a = make_settings(tmp_path, "postgresql://u:pw@db/a")
    b = make_settings(tmp_path, "postgresql://u:pw@db/b")
    embedded = make_settings(tmp_path)
    assert database_fingerprint(a) != database_fingerprint(b) != database_fingerprint(embedded)
    assert "pw" not in database_fingerprint(a) and len(database_fingerprint(a)) == 16


def test_the_server_file_is_written_private_and_removed_only_by_its_server(tmp_path):
    settings = make_settings(tmp_path)
    path = write_server_file(settings, "http://127.0.0.1:1", "run-token")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert json.loads(path.read_text())["token"] == "run-token"
    path.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": os.getpid() + 1}))
    remove_server_file(settings)
    assert path.exists()  # another server's file stays
    write_server_file(settings, "http://127.0.0.1:1", "run-token")
    remove_server_file(settings)
    assert not path.exists()


def test_no_server_when_the_file_is_missing_stale_or_for_another_database(tmp_path):
    settings = make_settings(tmp_path)
    assert find_server(settings) is None
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    file = settings.data_dir / SERVER_FILE
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    mine = database_fingerprint(settings)
    for recorded in ({"url": "http://127.0.0.1:1", "pid": dead.pid, "database": mine, "token": "t"},
                     {"url": "http://127.0.0.1:1", "pid": os.getpid(), "database": "another",
                      "token": "t"},
                     {"url": "http://127.0.0.1:1", "pid": os.getpid(), "database": mine},  # no token
                     {"url": "http://127.0.0.1:1", "pid": os.getpid(),  # alive, does not answer
                      "database": mine, "token": "t"},
                     ["not", "an", "object"]):
        file.write_text(json.dumps(recorded))
        assert find_server(settings) is None, recorded
    file.write_text("{broken")
    assert find_server(settings) is None


def test_the_fast_path_reads_the_same_data_directory_and_database_as_the_settings(
        tmp_path, monkeypatch):
    from pinlog.cli import remote

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PINLOG_DATA_DIR", str(tmp_path / "d"))
    (tmp_path / ".env").write_text("PINLOG_DATABASE_URL=postgresql://u:pw@db/x\n")
    seen = []
    monkeypatch.setattr(remote, "_recorded", lambda path, fp: seen.append((path, fp)))
    remote.recorded_server()
    settings = make_settings(tmp_path, "postgresql://u:pw@db/x", data_dir=tmp_path / "d")
    assert seen == [(tmp_path / "d" / SERVER_FILE, database_fingerprint(settings))]
    monkeypatch.setenv("pinlog_server_url", "http://127.0.0.1:9")  # names are case-insensitive
    assert remote.recorded_server() is None and len(seen) == 1


def test_an_explicit_server_url_wins(tmp_path):
    settings = make_settings(tmp_path, server_url="http://127.0.0.1:9")
    server = find_server(settings)
    assert server is not None and server.explicit and server.url == "http://127.0.0.1:9"
