"""Concurrent migrations (issue: replicas starting together): every run takes the migration
advisory lock, so `pinlog migrate & pinlog migrate & pinlog migrate & wait` on an empty
database exits 0 three times and leaves the schema at head once. (Real processes: Alembic's
environment is module-global state, so concurrent upgrades inside one process are not a valid
stand-in for replicas.)"""

from __future__ import annotations

import subprocess

import psycopg

from pinlog.db import migrate
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, create_database
from tests.helpers import PINLOG, pinlog_env


def _head(url: str) -> str | None:
    return migrate.current_revision(url)


def test_three_concurrent_migrate_commands_on_an_empty_database_all_exit_0(pg_server_url, tmp_path):
    url = create_database(pg_server_url, "pinlog_concurrent_cli")
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=url,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    procs = [subprocess.Popen(PINLOG + ["migrate"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outcomes = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    assert [rc for rc, _, _ in outcomes] == [0, 0, 0], outcomes
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM ai.alembic_version").fetchone()[0] == 1
        assert conn.execute("SELECT to_regclass('ai.context_ai_state') IS NOT NULL").fetchone()[0]
    assert _head(url) is not None
