"""Concurrent migrations (issue: replicas starting together): every run takes the migration
advisory lock, so `pinlog migrate & pinlog migrate & pinlog migrate & wait` on an empty
database exits 0 three times and leaves the schema at head once. (Real processes: Alembic's
environment is module-global state, so concurrent upgrades inside one process are not a valid
stand-in for replicas.)"""

from __future__ import annotations

import subprocess

import psycopg

from pinlog.db import migrate
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, create_database, create_legacy_database
from tests.helpers import PINLOG, pinlog_env
from tests.support.locks import relation_locks, waiting_for_advisory_lock


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


def wait_until(check, what: str, thread) -> object:
    """Poll ``check()`` (a database an external backend changes) until truthy; fail if the
    thread under test ended first or after 60 s."""
    for _ in range(1200):
        value = check()
        if value or not thread.is_alive():
            break
        thread.join(0.05)
    assert value, f"never saw {what}"
    return value


def test_a_waiting_migrate_holds_no_lock_and_changes_nothing_until_it_has_the_migration_lock(
        pg_server_url):
    """Replicas starting together on a database that still has our legacy version table
    (``public.alembic_version``): a `pinlog migrate` waiting for another one's migration lock
    has changed nothing and holds no table lock (it takes the lock before it inspects or moves
    anything), so the backend's and the other migration's work never queue behind it."""
    import threading

    url = create_legacy_database(pg_server_url, "pinlog_legacy_wait")
    holder = psycopg.connect(url)  # another migration, holding the lock
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (migrate.MIGRATION_LOCK_KEY,))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            migrate.upgrade(url)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)

    waiting = threading.Thread(target=run)
    waiting.start()
    try:
        with psycopg.connect(url, autocommit=True) as watcher:
            pids = wait_until(lambda: waiting_for_advisory_lock(watcher),
                              "the migrate waiting for the migration lock", waiting)
            assert relation_locks(watcher, pids) == []
            # nothing changed: the legacy table is readable at once, our table not created
            watcher.execute("SET lock_timeout = '2s'")
            assert watcher.execute("SELECT version_num FROM public.alembic_version").fetchall() \
                == [("0001",)]
    finally:
        holder.rollback()
        holder.close()
        waiting.join(120)
    assert not failure, failure
    assert migrate.current_revision(url) == migrate.head()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None
