"""``pinlog migrate --adopt [--dry-run]`` on a reference-shaped database (issue 14, SPEC §2.2):
detects it, adds only what our ai side needs, in place, in one transaction, idempotently; our
history in ``ai.alembic_version``; the backend's schema, rows and version table untouched; a
plain ``pinlog migrate`` keeps working on both kinds of database."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from sqlalchemy.engine import make_url

from pinlog.cli.app import describe_error
from pinlog.db import migrate
from pinlog.db.migrate import MigrationBusy, MigrationConfig
from tests.conftest import create_database, create_legacy_database
from tests.integration.adoption.reference import (
    BACKEND_CANCEL,
    BACKEND_CANCEL_EMBEDDING,
    BACKEND_INSERT,
    REF_DIM,
    REF_PROFILE,
    backend_snapshot,
    build_reference_database,
)
from tests.support.locks import relation_locks, waiting_for_advisory_lock


def _ai_columns(conn: psycopg.Connection) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'ai'").fetchall():
        out.setdefault(table, set()).add(column)
    return out


def _relfilenodes(conn: psycopg.Connection) -> dict[str, int]:
    return dict(conn.execute(
        "SELECT c.relname, c.relfilenode FROM pg_class c WHERE c.relnamespace = 'ai'::regnamespace "
        "AND c.relkind = 'r'").fetchall())


def _state_rows(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute("SELECT context_id, embedding_status, keyword_status, retry_count, "
                        "updated_at FROM ai.context_ai_state ORDER BY 1").fetchall()


def test_dry_run_prints_the_plan_and_changes_nothing(reference_url):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        before = (_ai_columns(conn), backend_snapshot(conn), _state_rows(conn))
    plan = migrate.adopt(reference_url, REF_DIM, dry_run=True)
    text = plan.render()
    assert plan.kind == "foreign"
    for fragment in ("add column ai.context_ai_state.rescanned_at",
                     "add column ai.context_embedding.text_sha256",
                     "add column ai.keyword_preset.examples",
                     "create ai.keyword_preset_embedding", "create ai.context_ai_event",
                     "allow NULL in ai.keyword_preset.embedding",
                     "copy preset vectors", "retry_count >= 0", "stamp ai.alembic_version"):
        assert fragment in text, fragment
    assert "relax" not in text  # same dimension as the profile: the column stays vector(1536)
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert (_ai_columns(conn), backend_snapshot(conn), _state_rows(conn)) == before
        assert conn.execute("SELECT to_regclass('ai.alembic_version')").fetchone()[0] is None
    assert migrate.current_revision(reference_url) is None


def test_plain_migrate_refuses_a_foreign_database_and_changes_nothing(reference_url):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        before = (_ai_columns(conn), backend_snapshot(conn))
    with pytest.raises(migrate.AdoptionRequired, match="--adopt"):
        migrate.upgrade(reference_url)
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert (_ai_columns(conn), backend_snapshot(conn)) == before


def test_adopt_twice_in_place_and_the_backend_is_untouched(reference_url):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        backend = backend_snapshot(conn)
        states = _state_rows(conn)
        files = _relfilenodes(conn)
    first = migrate.adopt(reference_url, REF_DIM)
    second = migrate.adopt(reference_url, REF_DIM)
    migrate.upgrade(reference_url)  # a later plain `pinlog migrate` keeps working
    assert first.kind == "foreign" and second.kind == "ours"
    assert "nothing to add" in second.render()
    assert migrate.current_revision(reference_url) == migrate.head()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert backend_snapshot(conn) == backend
        # statuses, retry counts and updated_at of every row as the backend left them
        assert _state_rows(conn) == states
        # in place: no table of the backend's was rewritten (same files)
        assert {t: f for t, f in _relfilenodes(conn).items() if t in files} == files
        columns = _ai_columns(conn)
        assert {"rescanned_at", "last_error", "last_error_at", "embedding_start_retry",
                "keyword_start_retry"} <= columns["context_ai_state"]
        assert "text_sha256" in columns["context_embedding"]
        assert {"keyword_preset_embedding", "context_ai_event", "alembic_version",
                "adoption"} <= set(columns)
        assert conn.execute("SELECT version_num FROM ai.alembic_version").fetchall() == \
            [(migrate.head(),)]
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None
        # the preset vectors stored on the preset rows, now one per (preset, profile)
        assert conn.execute("SELECT preset_id, embedding_profile FROM ai.keyword_preset_embedding "
                            "ORDER BY 1").fetchall() == [(101, REF_PROFILE), (201, REF_PROFILE),
                                                         (301, REF_PROFILE), (501, REF_PROFILE)]
        # the crashed PROCESSING stages got their start recorded (SPEC §7.3 re-claim)
        assert conn.execute("SELECT context_id, embedding_start_retry, keyword_start_retry "
                            "FROM ai.context_ai_state WHERE embedding_start_retry IS NOT NULL "
                            "OR keyword_start_retry IS NOT NULL ORDER BY 1").fetchall() == \
            [(2, 1, None), (6, None, 2)]
        # the backend's CHECK stays (its rescan owns retry_count)
        assert conn.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = "
                            "'ai.context_ai_state'::regclass AND contype = 'c' AND "
                            "pg_get_constraintdef(oid) LIKE '%retry_count <= 3%'").fetchone()[0] == 1
    with pytest.raises(Exception, match="adopted database"):
        migrate.downgrade(reference_url)
    assert migrate.current_revision(reference_url) == migrate.head()


def test_a_backend_alembic_history_with_our_revision_id_stays_the_backends(reference_url):
    """A backend whose own Alembic history sits in ``public.alembic_version`` with an id that is
    also ours (a hand-picked ``0001``) is still a foreign database: plain migrate refuses,
    --adopt adopts, and neither its version table nor ``core`` is touched."""
    with psycopg.connect(reference_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES ('0001')")
        backend = backend_snapshot(conn)
    with pytest.raises(migrate.AdoptionRequired, match="--adopt"):
        migrate.upgrade(reference_url)
    assert migrate.adopt(reference_url, REF_DIM, dry_run=True).kind == "foreign"
    assert migrate.adopt(reference_url, REF_DIM).kind == "foreign"
    migrate.upgrade(reference_url)
    assert migrate.current_revision(reference_url) == migrate.head()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert backend_snapshot(conn) == backend
        assert conn.execute("SELECT version_num FROM public.alembic_version").fetchall() == \
            [("0001",)]
        assert "text_sha256" in _ai_columns(conn)["context_embedding"]
        assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE "
                            "table_schema = 'core' AND column_name LIKE '%lexemes'"
                            ).fetchone()[0] == 0


def test_adopt_relaxes_a_fixed_dimension_of_another_profile_without_rewrite(reference_url):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        files = _relfilenodes(conn)
    plan = migrate.adopt(reference_url, 8)
    assert "relax ai.context_embedding.embedding vector(1536) -> vector" in plan.render()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
                            "attrelid = 'ai.context_embedding'::regclass AND attname = 'embedding'"
                            ).fetchone()[0] == "vector"
        assert _relfilenodes(conn)["context_embedding"] == files["context_embedding"]
        assert conn.execute("SELECT count(*) FROM ai.context_embedding").fetchone()[0] == 4


def test_adopt_is_one_transaction_a_failure_changes_nothing(reference_url, monkeypatch):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        before = (_ai_columns(conn), backend_snapshot(conn))

    def broken(*args, **kwargs):
        raise RuntimeError("upgrade failed half-way")

    monkeypatch.setattr(migrate.command, "upgrade", broken)
    with pytest.raises(RuntimeError, match="half-way"):
        migrate.adopt(reference_url, REF_DIM)
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert (_ai_columns(conn), backend_snapshot(conn)) == before


def test_adopt_on_a_fresh_database_refuses(pg_server_url):
    url = create_database(pg_server_url, "pinlog_empty")
    with pytest.raises(migrate.NothingToAdopt):
        migrate.adopt(url, REF_DIM)


def test_our_old_public_version_table_moves_into_ai(pg_server_url):
    """A database migrated before the version table moved (public.alembic_version holding our
    revision): the next `pinlog migrate` moves it into ai in the same transaction."""
    url = create_legacy_database(pg_server_url, "pinlog_legacy")
    assert migrate.current_revision(url) == "0001"
    migrate.upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None
        assert conn.execute("SELECT version_num FROM ai.alembic_version").fetchall() == \
            [(migrate.head(),)]


def test_a_backends_own_public_alembic_version_is_left_alone(pg_server_url):
    url = create_database(pg_server_url, "pinlog_other")
    with psycopg.connect(url, autocommit=True) as conn:
        build_reference_database(conn)
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES ('a1b2c3d4e5f6')")
    with pytest.raises(migrate.AdoptionRequired):
        migrate.upgrade(url)
    migrate.adopt(url, REF_DIM)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT version_num FROM public.alembic_version").fetchall() == \
            [("a1b2c3d4e5f6",)]
    assert migrate.current_revision(url) == migrate.head()


def test_concurrent_adoptions_wait_for_each_other_and_both_succeed(reference_url):
    """Two `pinlog migrate --adopt` runs started while another migration holds the migration
    advisory lock: both wait for it holding no lock on the backend's ai tables (they take the
    migration lock before reading or altering anything), so the backend's reads and writes keep
    flowing; then they run one after the other and both succeed — the second finds the adoption
    done."""
    import threading

    holder = psycopg.connect(reference_url, autocommit=False)
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (migrate.MIGRATION_LOCK_KEY,))
    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            results[name] = migrate.adopt(reference_url, REF_DIM).kind
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[name] = exc

    runs = [threading.Thread(target=run, args=(name,)) for name in ("first", "second")]
    for thread in runs:
        thread.start()
    try:
        with psycopg.connect(reference_url, autocommit=True) as watcher:
            # proceed only once both adoptions really wait on the lock (no sleeps)
            for _ in range(1200):
                waiting = waiting_for_advisory_lock(watcher)
                if len(waiting) == 2 or not all(t.is_alive() for t in runs):
                    break
                runs[0].join(0.05)
            assert len(waiting) == 2 and results == {}, results
            assert relation_locks(watcher, waiting) == []
        # the backend keeps working meanwhile (its own statements; a lock wait would fail fast)
        with psycopg.connect(reference_url) as backend:
            backend.execute("SET lock_timeout = '2s'")
            backend.execute(BACKEND_INSERT, (100,))
            backend.execute(BACKEND_CANCEL, (100,))
            backend.execute(BACKEND_CANCEL_EMBEDDING, (3,))
            assert backend.execute("SELECT count(*) FROM ai.context_embedding").fetchone()[0] > 0
            backend.rollback()
    finally:
        holder.rollback()
        holder.close()
        for thread in runs:
            thread.join(120)
    assert sorted(map(str, results.values())) == ["foreign", "ours"], results
    assert migrate.current_revision(reference_url) == migrate.head()


def _as_role(url: str, conn: psycopg.Connection) -> str:
    """A new login role with what serving needs and no more: USAGE on ai and read/write on its
    tables and sequences (not their owner, no CREATE on the database). Returns its URL."""
    role = f"ai_rw_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
    conn.execute(f"GRANT USAGE ON SCHEMA ai TO {role}")
    conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ai TO {role}")
    conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA ai TO {role}")
    return make_url(url).set(username=role, password=f"pw-{role}").render_as_string(
        hide_password=False)


def test_a_role_that_does_not_own_the_ai_tables_gets_one_clear_line(reference_url):
    """--adopt needs the owner of the ai tables (ALTER TABLE): another role gets one line naming
    the missing privilege (exit 2) and nothing changes; once adopted, a plain migrate at our
    head with that role has nothing to do and succeeds (no CREATE on the database needed)."""
    with psycopg.connect(reference_url, autocommit=True) as conn:
        role_url = _as_role(reference_url, conn)
        backend = backend_snapshot(conn)
    with pytest.raises(Exception) as refused:
        migrate.adopt(role_url, REF_DIM)
    message, code = describe_error(refused.value) or ("", 0)
    assert code == 2 and "lacks a privilege" in message and "must be owner" in message
    assert "pw-" not in message
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert backend_snapshot(conn) == backend
        assert conn.execute("SELECT to_regclass('ai.alembic_version')").fetchone()[0] is None
    migrate.adopt(reference_url, REF_DIM)  # by the owner
    with psycopg.connect(reference_url, autocommit=True) as conn:
        role_url = _as_role(reference_url, conn)  # grants on the tables adoption created
    migrate.upgrade(role_url)
    assert migrate.current_revision(role_url) == migrate.head()


def test_a_busy_table_is_reported_as_busy_not_as_a_connection_problem(reference_url):
    """A backend transaction holding a lock on an ai table: the adoption gives up after its
    lock_timeout (the server's own timer; here 0.5 s, two attempts) instead of queueing the
    backend's traffic behind its ALTER TABLE, says the table is busy, and has changed nothing.
    (The 60 s join only turns an adoption that never gives up into a failure instead of a
    hang.)"""
    import threading

    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(migrate.adopt(reference_url, REF_DIM, config=MigrationConfig(
                lock_timeout=0.5, attempts=2, max_wait=0)))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            outcome.append(exc)

    with psycopg.connect(reference_url) as holder:
        holder.execute("SELECT count(*) FROM ai.context_ai_state")  # ACCESS SHARE, held open
        adoption = threading.Thread(target=run)
        adoption.start()
        adoption.join(60)
        gave_up = not adoption.is_alive()
        holder.rollback()
    adoption.join(120)
    assert gave_up, "the adoption kept waiting for the busy table (no lock_timeout)"
    [busy] = outcome
    assert isinstance(busy, Exception), busy
    message, code = describe_error(busy) or ("", 0)
    assert isinstance(busy, MigrationBusy)
    assert code == 1 and "busy" in message and "nothing was changed" in message
    assert migrate.adopt(reference_url, REF_DIM).kind == "foreign"
