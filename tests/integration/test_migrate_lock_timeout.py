"""`pinlog migrate` under a busy table (issue 27 #3): a database one revision behind the one that
alters ``ai.keyword_preset`` (``ALTERS_TABLE``), and a long transaction holding that table. The migration waits for that
table lock at most ``PINLOG_MIGRATE_LOCK_TIMEOUT``, so a live query queued behind its pending
lock gets through while the long transaction still runs; the attempt is rolled back whole and
tried again; after the last attempt one clear line names the session and nothing has changed.

Ordering comes from the server's lock table (``tests/support/locks.py``), never from sleeps;
the 20 s ``statement_timeout`` of the live query only turns a queue that never clears into a
failure instead of a hang.
"""

from __future__ import annotations

import threading

import psycopg

from pinlog.db import migrate
from pinlog.db.migrate import MigrationBusy, MigrationConfig
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, create_database
from tests.helpers import pinlog_env, run_pinlog
from tests.support.locks import waiting_for_relation

TABLE = "ai.keyword_preset"
#: The revision that alters TABLE (file 0006_any_preset_category.py); later revisions leave it alone.
ALTERS_TABLE = "0005_preset_categories"


def before_the_alteration() -> str:
    """The revision just before :data:`ALTERS_TABLE`: where the test databases start."""
    chain = migrate.revision_chain()
    return chain[chain.index(ALTERS_TABLE) - 1]


def one_revision_behind(pg_server_url: str, prefix: str) -> str:
    url = create_database(pg_server_url, prefix)
    migrate.upgrade(url, before_the_alteration())
    return url


def hold_the_table(url: str) -> psycopg.Connection:
    """A long transaction (a report query) holding ACCESS SHARE on the table, left open."""
    holder = psycopg.connect(url)
    holder.execute(f"SELECT count(*) FROM {TABLE}")
    return holder


def test_live_traffic_passes_a_migration_waiting_for_a_busy_table_and_the_migration_retries(
        pg_server_url):
    url = one_revision_behind(pg_server_url, "pinlog_lock_live")
    holder = hold_the_table(url)
    retries: list[int] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            migrate.upgrade(url, config=MigrationConfig(lock_timeout=0.5, attempts=10_000,
                                                        max_wait=0),
                            on_retry=lambda attempt, attempts, wait: retries.append(attempt))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)

    migration = threading.Thread(target=run)
    migration.start()
    queued = False
    try:
        with psycopg.connect(url, autocommit=True) as watcher:
            for _ in range(50):  # until one live query was seen queued behind the migration
                done: list[object] = []

                def live(done: list[object] = done) -> None:
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("SET statement_timeout = '20s'")
                        try:
                            done.append(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone())
                        except psycopg.Error as exc:
                            done.append(exc)

                while migration.is_alive() and not waiting_for_relation(watcher, TABLE):
                    migration.join(0.01)  # the migration waits for its ACCESS EXCLUSIVE lock
                query = threading.Thread(target=live)
                query.start()
                while query.is_alive() and len(waiting_for_relation(watcher, TABLE)) < 2:
                    query.join(0.005)
                queued |= query.is_alive()  # seen waiting behind the migration's pending lock
                query.join(60)
                assert done and not isinstance(done[0], BaseException), done
                if queued:
                    break
            # the long transaction still runs, and the schema is unchanged
            assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            assert migrate.current_revision(url) == before_the_alteration()
    finally:
        holder.rollback()
        holder.close()
        migration.join(120)
    assert queued, "no live query was ever seen queued behind the migration"
    assert failure == []
    assert retries, "the busy table should have cost at least one attempt"
    assert migrate.current_revision(url) == migrate.head()


def test_migrate_gives_up_after_its_attempts_with_one_clear_line_and_changes_nothing(
        pg_server_url, tmp_path):
    url = one_revision_behind(pg_server_url, "pinlog_lock_busy")
    holder = hold_the_table(url)
    pid = holder.info.backend_pid
    try:
        try:
            migrate.upgrade(url, config=MigrationConfig(lock_timeout=0.2, attempts=2, max_wait=0))
        except MigrationBusy as exc:
            message = exc.message
        else:
            raise AssertionError("the migration did not give up")
        assert "busy" in message and "nothing was changed" in message
        assert f"pid {pid} " in message and TABLE in message
        env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=url,
                         PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                         PINLOG_MIGRATE_LOCK_TIMEOUT="0.2", PINLOG_MIGRATE_ATTEMPTS="3")
        result = run_pinlog(["migrate"], env, timeout=120)
        assert result.returncode == 1, result.stderr
        assert "attempt 2 of 3" in result.stderr and "attempt 3 of 3" in result.stderr
        assert "a table is busy" in result.stderr and "Traceback" not in result.stderr
        assert migrate.current_revision(url) == before_the_alteration()
    finally:
        holder.rollback()
        holder.close()
    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.head()
