"""The database goes away under a running app (SPEC §6, §12), in this process: every request
that needs it is a JSON 503 with ``Retry-After`` (never a bare 500), and ``/metrics`` keeps
answering with ``pinlog_db_up 0`` and the last database gauges. The outage is real: the app's
own database stops accepting connections and its sessions are terminated (the rest of the test
server is untouched; the subprocess run with a stopped server is ``test_db_outage.py``)."""

from __future__ import annotations

import re

import psycopg
from sqlalchemy.engine import make_url

from pinlog.db import migrate
from tests.conftest import create_database, make_settings
from tests.support.app import running_app


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    assert match, f"{name} missing"
    return float(match.group(1))


def cut_off(server_url: str, database: str, *, allow: bool) -> None:
    """Refuse (or allow again) new connections to ``database`` and end its sessions."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS {str(allow).lower()}')
        if not allow:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (database,))


async def test_database_gone_under_a_running_app_is_json_503_and_metrics_say_so(
        tmp_path, pg_server_url):
    url = create_database(pg_server_url, "pinlog_gone")
    database = make_url(url).database
    migrate.upgrade(url)
    settings = make_settings(tmp_path, url)
    async with running_app(settings, url, components=("core",),
                           raise_app_exceptions=False) as app:
        _, auth = await app.member()
        created = await app.http.post("/v1/records", headers=auth, json={
            "place": {"externalPlaceId": "p-1", "name": "다방", "lat": 37.5, "lng": 127.0},
            "text": "비 오는 날 조용한 다방"})
        assert created.status_code == 201, created.text
        healthy = await app.http.get("/metrics")
        assert metric(healthy.text, "pinlog_db_up") == 1
        gauge = re.compile(r'^pinlog_state_rows\{stage="embedding",status="PENDING"\} 1\.0$', re.M)
        assert gauge.search(healthy.text)

        cut_off(pg_server_url, database, allow=False)
        try:
            for method, path, body in (("GET", "/v1/records", None), ("GET", "/v1/me", None),
                                       ("POST", "/v1/records", {"place": {
                                           "externalPlaceId": "p-2", "name": "카페",
                                           "lat": 37.5, "lng": 127.0}, "text": "창가 자리"})):
                answer = await app.http.request(method, path, json=body, headers={
                    **auth, "X-Request-Id": f"gone-{path}"})
                assert answer.status_code == 503, (path, answer.status_code, answer.text)
                assert answer.json()["error"] == "DATABASE_UNAVAILABLE", answer.text
                assert int(answer.headers["Retry-After"]) > 0
                assert answer.headers["X-Request-Id"] == f"gone-{path}"
            during = await app.http.get("/metrics")
            assert during.status_code == 200
            assert metric(during.text, "pinlog_db_up") == 0
            assert gauge.search(during.text)  # the last values are kept
        finally:
            cut_off(pg_server_url, database, allow=True)
        again = await app.http.get("/v1/records", headers=auth)
        assert again.status_code == 200, again.text
        assert metric((await app.http.get("/metrics")).text, "pinlog_db_up") == 1
