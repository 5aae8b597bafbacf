"""Shared fixtures: a real PostgreSQL (embedded by default, or PINLOG_TEST_DATABASE_URL).

One fresh database per test session, migrated to head; every test that asks for ``db_url``
(directly or through ``engine``/``settings``) starts from empty tables (TRUNCATE … RESTART
IDENTITY), so tests do not depend on order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from pinlog.composition import Config, build_config
from pinlog.db import migrate
from pinlog.db.embedded import EmbeddedDatabase, EmbeddedDatabaseError
from pinlog.db.engine import create_engine
from pinlog.settings import Settings, load_settings

#: Fixtures registered once for the whole suite (fake provider/judge, seeded presets), and the
#: hang diagnostics (a test still running after 230 s prints its event loop's tasks).
pytest_plugins = ("tests.support.fixtures", "tests.support.hang_dump")


def pytest_configure(config: pytest.Config) -> None:
    """Give this session its own temp root (unless ``--basetemp`` was given).

    The embedded PostgreSQL runs as its own system user when the tests run as root, and it makes
    the folders above its data dir traversable. pytest's shared ``/tmp/pytest-of-<user>`` is reset
    to mode 0700 by every other pytest session that starts (a parallel run, the mutation runner's
    sessions), which would cut a running test server off its own ``tmp_path`` data dir. A private
    root per session avoids that; it is removed at the end of the session.
    """
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        root = Path(tempfile.mkdtemp(prefix="pinlog-pytest-"))
        root.chmod(0o755)
        config.option.basetemp = str(root / "t")
        config._pinlog_temp_root = root  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    root = getattr(config, "_pinlog_temp_root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)

#: The only PINLOG_* variables of the calling shell the suite reads (README "Development").
TEST_VARIABLES = ("PINLOG_TEST_DATABASE_URL",)


def _hermetic_environment() -> None:
    """The suite ignores the developer's PINLOG_* settings (issue 13): they are removed from
    this process's environment (so from every subprocess it starts) before anything loads
    settings, and no ``.env`` file is read."""
    for name in [n for n in os.environ if n.upper().startswith("PINLOG_")
                 and n.upper() not in TEST_VARIABLES]:
        del os.environ[name]
    Settings.model_config["env_file"] = None


_hermetic_environment()

TEST_SECRET = "test-internal-secret-0123456789"
TEST_JWT_SECRET = "test-jwt-secret-0123456789-abcdefghijklmnop"


#: The session fixture that starts the test database server (lazily: only when a test of the
#: session requests it, directly or through ``db_url``/``engine``/``settings``/``sync_conn``…).
DATABASE_FIXTURE = "pg_server_url"
#: Tests here run without any database (docs/ARCHITECTURE.md §7).
UNIT_TESTS = Path(__file__).parent / "unit"


def needs_the_database(path: Path, fixturenames: Iterable[str]) -> bool:
    """True when a test at ``path`` whose fixture closure is ``fixturenames`` would start the
    test database server, i.e. a unit test that must move to ``tests/integration`` (or drop
    the fixture)."""
    return path.is_relative_to(UNIT_TESTS) and DATABASE_FIXTURE in fixturenames


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a unit test that requests the database, before any fixture (so before the server
    starts), naming the way out."""
    if needs_the_database(item.path, getattr(item, "fixturenames", ())):
        pytest.fail(f"{item.nodeid}: a unit test must not need the database (its fixtures "
                    f"include {DATABASE_FIXTURE}): move it to tests/integration or build what it "
                    "needs without one (make_settings(tmp_path) has no database URL)",
                    pytrace=False)


def _with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """libpq URL of a maintenance database on the test server.

    The embedded server's folder (``pinlog-test-*`` in the temp dir, ~60 MB) is removed at session
    end, so repeated runs leave nothing behind."""
    external = os.environ.get("PINLOG_TEST_DATABASE_URL")
    if external:
        yield external
        return
    root = Path(tempfile.mkdtemp(prefix="pinlog-test-"))
    try:
        server = EmbeddedDatabase(root)
        server.start()
        try:
            yield server.url("postgres")
        finally:
            _stop_test_server(server)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _stop_test_server(server: EmbeddedDatabase) -> None:
    """Fast shutdown with a generous deadline (a loaded 2-core machine can need > 30 s); past it,
    PostgreSQL's immediate shutdown (SIGQUIT), so a slow stop never fails the session's last test
    and no server outlives its removed folder."""
    try:
        server.stop(timeout=120)
    except EmbeddedDatabaseError:
        pid_file = server.pgdata / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)


def create_database(server_url: str, prefix: str) -> str:
    """Create a uniquely named database and return its libpq URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_database(server_url, name)


def create_legacy_database(server_url: str, prefix: str) -> str:
    """A new database migrated to our revision 0001 whose history is still in the legacy
    ``public.alembic_version`` (before our version table moved into ``ai``); its libpq URL."""
    url = create_database(server_url, prefix)
    migrate.upgrade(url, "0001")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version SELECT version_num FROM ai.alembic_version")
        conn.execute("DROP TABLE ai.alembic_version")
    return url


@pytest.fixture(scope="session")
def migrated_db_url(pg_server_url: str) -> str:
    url = create_database(pg_server_url, "pinlog_test")
    migrate.upgrade(url)
    return url


#: How long the TRUNCATE between tests waits for a lock before it reports the session holding it
#: (a leaked transaction of an earlier test; normally it waits for nothing).
TRUNCATE_LOCK_TIMEOUT = "30s"


def truncate_all(url: str) -> None:
    """Empty every core.* and ai.* table (identities restarted) but our version table.

    Raises:
        RuntimeError: another session held a lock on them for :data:`TRUNCATE_LOCK_TIMEOUT` — a
            transaction an earlier test leaked. The message names those sessions (pid,
            application, state, its last statement's start); they are terminated, so this one
            test fails loudly instead of every later one waiting out pytest's timeout.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
            "WHERE schemaname IN ('core', 'ai') AND tablename <> 'alembic_version'"
        ).fetchall()
        if not tables:
            return
        conn.execute(f"SET lock_timeout = '{TRUNCATE_LOCK_TIMEOUT}'")
        try:
            conn.execute("TRUNCATE " + ", ".join(t[0] for t in tables) + " RESTART IDENTITY CASCADE")
        except psycopg.errors.LockNotAvailable:
            leaked = conn.execute(
                "SELECT pid, application_name, state, left(query, 120), "
                "pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND state IN ('idle in transaction', 'idle in transaction (aborted)', 'active') "
                "AND backend_type = 'client backend'").fetchall()
            raise RuntimeError(
                f"an earlier test left a transaction holding a lock for {TRUNCATE_LOCK_TIMEOUT} "
                f"(sessions terminated: {[row[:4] for row in leaked]})") from None


@pytest.fixture
def db_url(migrated_db_url: str) -> str:
    """A migrated database with empty tables (libpq URL)."""
    truncate_all(migrated_db_url)
    return migrated_db_url


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[object]:
    eng = create_engine(db_url, pool_size=10)
    try:
        yield eng
    finally:
        await eng.dispose()


def make_settings(tmp_path: Path, db_url: str | None = None, **overrides: object) -> Settings:
    """Settings for tests: fixed secrets, a temp data dir, the test database."""
    values: dict[str, object] = {
        "data_dir": tmp_path / "data",
        "internal_secrets": TEST_SECRET,
        "jwt_secret": TEST_JWT_SECRET,
        "rescan_enabled": False,
        "retention_enabled": False,
    }
    if db_url is not None:
        values["database_url"] = db_url
    values.update(overrides)
    return load_settings(**values)


def config_of(settings: Settings) -> Config:
    """The per-component configuration of ``settings`` (what the composition root builds)."""
    return build_config(settings)


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    return make_settings(tmp_path, db_url)


@pytest.fixture
def sync_conn(db_url: str) -> Iterator[psycopg.Connection]:
    """An autocommit psycopg connection to the test database (a separate session)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        yield conn
