"""Issue 13 item 7 through real `pinlog` subprocesses on a real PostgreSQL: the start-up line,
HTTP request metrics, the oldest-unfinished gauge, `serve --host --port`, `records`,
`--version`, help texts that point at nothing a user lacks, and one dispatch summary from
`import` when the ai side is unreachable."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest

from pinlog import __version__
from tests.support.fake_openai import FakeOpenAI
from tests.support.serve import serve_env
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.helpers import PINLOG, free_port, pinlog_env, run_pinlog, wait_http
from tests.integration.core.rescan.factory import make_context, make_member

pytestmark = pytest.mark.slow

COMMANDS = [[], ["serve"], ["rescan"], ["reprocess"], ["status"], ["import"], ["search"],
            ["demo"], ["migrate"], ["db"], ["db", "url"], ["db", "stop"], ["presets"],
            ["presets", "load"],
            ["presets", "list"], ["members"], ["members", "create"], ["token"], ["records"],
            ["purge"]]


def test_version_and_help_texts(tmp_path):
    env = pinlog_env(tmp_path / "data", COLUMNS="200")
    version = run_pinlog(["--version"], env, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"pinlog {__version__}"
    for command in COMMANDS:
        result = run_pinlog([*command, "--help"], env, timeout=60)
        assert result.returncode == 0, (command, result.stderr)
        for word in ("SPEC", "§", "README", "ARCHITECTURE"):
            assert word not in result.stdout, (command, word)
        # issue 27 #11: no <bool> metavar on flags, no raw RST markup from docstrings
        for markup in ("<bool>", "``", ":mod:", ":func:", ":class:", ":meth:"):
            assert markup not in result.stdout, (command, markup)


def test_serve_host_port_startup_line_http_metrics_and_oldest_unfinished(
        tmp_path, db_url, sync_conn):
    fake = FakeOpenAI().start()
    port = free_port()
    env = serve_env(tmp_path, db_url, free_port(), fake, PINLOG_RESCAN_ENABLED="false")
    try:
        assert run_pinlog(["presets", "load"], env, timeout=120).returncode == 0
        make_context(sync_conn, age_s=120)  # unfinished for two minutes (rescan off)
        err = tmp_path / "serve.err"
        with open(err, "w") as stderr:
            proc = subprocess.Popen(PINLOG + ["serve", "--host", "127.0.0.1", "--port", str(port)],
                                    env=env, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                base = f"http://127.0.0.1:{port}"  # not PINLOG_PORT: the option wins
                wait_http(f"{base}/health", proc)
                assert httpx.get(f"{base}/v1/records", timeout=10).status_code == 401
                assert httpx.get(f"{base}/v1/records/7", timeout=10).status_code == 401
                text = httpx.get(f"{base}/metrics", timeout=10).text
            finally:
                proc.terminate()
                proc.wait(30)
    finally:
        fake.stop()
    assert re.search(r'^pinlog_http_requests_total\{method="GET",route="/v1/records",'
                     r'status="401"\} 1\.0$', text, re.M)
    assert re.search(r'^pinlog_http_requests_total\{method="GET",'
                     r'route="/v1/records/\{record_id\}",status="401"\} 1\.0$', text, re.M)
    assert 'pinlog_http_request_seconds_count{method="GET",route="/v1/records"}' in text
    oldest = float(re.search(r"^pinlog_oldest_unfinished_seconds ([0-9.e+]+)$", text,
                             re.M).group(1))
    assert 120 <= oldest < 3600
    lines = [json.loads(line) for line in err.read_text().splitlines() if line.startswith("{")]
    [started] = [r for r in lines if r["msg"] == "pinlog started"]
    # issue 22: the ai runtime starts once per serve (one provider probe, one line)
    assert len([r for r in lines if r["msg"] == "ai runtime started"]) == 1
    assert started["components"] == "core,ai"
    assert started["profile"] == env["PINLOG_EMBEDDING_PROFILE"]
    assert started["rescan"] == "off"
    assert started["database"].startswith("postgresql://")
    password = re.search(r"://[^:@/]*:([^@]+)@", db_url)
    if password:
        assert password.group(1) not in err.read_text()


def test_records_of_a_member(tmp_path, db_url, sync_conn):
    member = make_member(sync_conn)
    done = make_context(sync_conn, member_id=member, emb="COMPLETED", kw="COMPLETED")
    busy = make_context(sync_conn, member_id=member)
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url, COLUMNS="200",
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    result = run_pinlog(["records", "--member", str(member), "--json"], env, timeout=60)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    status = {c["contextId"]: c["aiStatus"] for r in body["records"] for c in r["contexts"]}
    assert status == {done: "ready", busy: "processing"}
    assert all("keywords" in r for r in body["records"])
    table = run_pinlog(["records", "--member", str(member)], env, timeout=60)
    assert table.returncode == 0 and "processing" in table.stdout and "ready" in table.stdout
    missing = run_pinlog(["records", "--member", "999999"], env, timeout=60)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_import_without_wait_prints_one_dispatch_summary(tmp_path, db_url):
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps({
        "member": "m1", "record": f"r{i}", "context": f"조용한 카페 {i}",
        "place": {"name": f"카페 {i}", "external_place_id": f"ext-{i}", "lat": 37.5,
                  "lng": 127.0}}, ensure_ascii=False) + "\n" for i in range(40)))
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url, COLUMNS="200",
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                     PINLOG_AI_BASE_URL=f"http://127.0.0.1:{free_port()}")  # nobody listens
    result = run_pinlog(["import", str(notes)], env, timeout=120)
    assert result.returncode == 0, result.stderr
    summaries = [line for line in result.stderr.splitlines() if line.startswith("dispatch:")]
    assert len(summaries) == 1 and "40 process request(s) not delivered" in summaries[0]
    assert "connection 40" in summaries[0]
    assert not [line for line in result.stderr.splitlines() if line.startswith("{")]
