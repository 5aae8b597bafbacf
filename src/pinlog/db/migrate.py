"""Programmatic Alembic: ``pinlog migrate [--adopt]`` and the tests use these (SPEC §2).

Our migration history lives in our own schema's version table, ``ai.alembic_version``
(:data:`VERSION_SCHEMA`) — never in ``public`` and never in a backend's own history (SPEC §2.2,
last paragraph). Three kinds of database are told apart by :func:`inspect_database`:

* ``empty`` — nothing of ours: ``pinlog migrate`` creates both schemas (today's path).
* ``ours`` — our version table exists (or the legacy ``public.alembic_version`` holding one of
  our revision ids, written before the version table moved: :func:`upgrade` moves it into
  ``ai`` in the same transaction, then drops the legacy table).
* ``foreign`` — ``ai.context_ai_state`` exists but no history of ours: a deployment whose
  backend owns ``core`` and created the ai tables with its own migration tool. ``pinlog
  migrate`` refuses (:class:`AdoptionRequired`); ``pinlog migrate --adopt`` runs
  :func:`adopt`: adds what our ai side needs in place, records the adoption in
  ``ai.adoption`` (so later revisions leave ``core`` alone: :func:`owns_core`), stamps
  revision ``0001`` and upgrades to head — all in ONE transaction.

Both run under ``lock_timeout`` (:class:`MigrationConfig`, issue 27 #3): a migration waiting for
a table lock that a long transaction holds would queue every later query on that table behind
it, so the wait is bounded (``PINLOG_MIGRATE_LOCK_TIMEOUT``, 3 s), the attempt is rolled back
whole, and the run is tried again (``PINLOG_MIGRATE_ATTEMPTS``, waiting 1, 2, 4 … s in between);
after the last attempt :class:`MigrationBusy` names the sessions holding locks on our tables.
The migration advisory lock itself is taken before the timeout is set: replicas migrating
together wait for each other as long as it takes (they queue no live traffic).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, pool, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.db.engine import sqlalchemy_url
from pinlog.errors import PinlogError
from pinlog.settings import Settings

#: Schema of our version table (``ai.alembic_version``).
VERSION_SCHEMA = "ai"
#: Creates that schema only when it is absent: ``CREATE SCHEMA IF NOT EXISTS`` needs CREATE on
#: the database even when the schema exists, which a role owning only the ai tables lacks.
ENSURE_VERSION_SCHEMA = (f"DO $$ BEGIN IF to_regnamespace('{VERSION_SCHEMA}') IS NULL THEN "
                         f"CREATE SCHEMA {VERSION_SCHEMA}; END IF; END $$")
#: Revision whose schema an adopted ai side is brought to before the normal upgrade runs.
ADOPTION_BASE = "0001"
REQUIRED_AI_TABLES = (
    "context_ai_state", "context_embedding", "keyword_preset", "keyword_preset_embedding",
    "context_keyword", "context_keyword_analysis", "context_ai_event",
)
#: Key of the PostgreSQL advisory lock every migration run holds (transaction-scoped, per
#: database), taken before anything is inspected: concurrent ``pinlog migrate [--adopt]`` runs
#: wait for each other, and the later ones find the work done. The bytes of "pinlog:m" as a
#: signed 64-bit integer.
MIGRATION_LOCK_KEY = int.from_bytes(b"pinlog:m", "big", signed=True)
#: SQLSTATE of a lock wait that passed ``lock_timeout`` (lock_not_available).
LOCK_NOT_AVAILABLE = "55P03"


@dataclass(frozen=True)
class MigrationConfig:
    """How long a migration waits for a table lock, and how often it tries (issue 27 #3).

    Attributes:
        lock_timeout: seconds one lock wait may take (``PINLOG_MIGRATE_LOCK_TIMEOUT``): what a
            waiting migration can cost the live traffic queued behind it.
        attempts: whole-transaction attempts (``PINLOG_MIGRATE_ATTEMPTS``).
        max_wait: longest pause between attempts, seconds (1, 2, 4 … up to it).
    """

    lock_timeout: float = 3.0
    attempts: int = 5
    max_wait: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> MigrationConfig:
        return cls(lock_timeout=settings.migrate_lock_timeout, attempts=settings.migrate_attempts)

    def wait(self, attempt: int) -> float:
        """Seconds to pause after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_wait, float(2 ** (attempt - 1)))


#: ``on_retry(attempt, attempts, wait_seconds)``: told before each pause (the CLI prints it).
RetryHook = Callable[[int, int, float], None]


class MigrationBusy(PinlogError, RuntimeError):
    """Every attempt of a migration met a table lock held past ``lock_timeout``; nothing was
    changed. The message names the sessions holding locks on our tables (pid, how long their
    transaction has run, the table) when the database lets us see them — never a query."""

    code = "MIGRATION_BUSY"


class AdoptionRequired(PinlogError, RuntimeError):
    """``pinlog migrate`` met ai tables created by another migration tool (SPEC §2.2)."""

    code = "ADOPTION_REQUIRED"


class NothingToAdopt(PinlogError, RuntimeError):
    """``pinlog migrate --adopt`` on a database without ai tables: use ``pinlog migrate``."""

    code = "NOTHING_TO_ADOPT"


def alembic_config(url: str, connection: Connection | None = None) -> Config:
    """An Alembic config for the database at ``url`` (libpq or SQLAlchemy form); with
    ``connection`` the migrations run on it, inside the caller's transaction."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("pinlog.db").joinpath("migrations")))
    cfg.attributes["sqlalchemy_url"] = sqlalchemy_url(url)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config("postgresql://localhost/unused"))


@lru_cache(maxsize=1)
def head() -> str:
    """The newest revision id of our migration scripts."""
    current = _scripts().get_current_head()
    assert current is not None
    return current


@lru_cache(maxsize=1)
def revision_chain() -> tuple[str, ...]:
    """Our revision ids, base (:data:`ADOPTION_BASE`) → head, read from the scripts (no
    database). The files in ``db/migrations/versions/`` sort in this order; the ids of the
    first six are older than the file names and never change (docs/ARCHITECTURE.md,
    "Migrations")."""
    return tuple(reversed([rev.revision for rev in _scripts().walk_revisions()]))


def revision_path(revision: str) -> Path:
    """The script file of ``revision``.

    Raises:
        alembic.util.CommandError: not one of our revision ids.
    """
    script = _scripts().get_revision(revision)
    assert script is not None and script.path is not None
    return Path(script.path)


def _our_revisions() -> frozenset[str]:
    return frozenset(revision_chain())


def __getattr__(name: str) -> str:
    # HEAD stays importable (tests, bench) while being derived from the scripts.
    if name == "HEAD":
        return head()
    raise AttributeError(name)


def _engine(url: str) -> Engine:
    return create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)


def _lock(conn: Connection) -> None:
    """Take the migration advisory lock for this transaction (:data:`MIGRATION_LOCK_KEY`)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})


def _set_lock_timeout(conn: Connection, config: MigrationConfig) -> None:
    """Bound every later lock wait of this transaction by ``config.lock_timeout`` (taken after
    the advisory lock: waiting for another migration is not bounded)."""
    conn.execute(text(f"SET LOCAL lock_timeout = '{max(1, round(config.lock_timeout * 1000))}ms'"))


def _is_lock_timeout(exc: BaseException) -> bool:
    return getattr(getattr(exc, "orig", None), "sqlstate", None) == LOCK_NOT_AVAILABLE


#: Sessions holding a lock on one of our tables inside a transaction older than the lock
#: timeout (pid, seconds, table): what a busy migration waited for. No query text.
_HOLDERS_SQL = """
SELECT DISTINCT a.pid, extract(epoch FROM now() - a.xact_start)::int AS seconds,
       n.nspname || '.' || c.relname AS relation
  FROM pg_locks l
  JOIN pg_class c ON c.oid = l.relation
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.granted AND n.nspname IN ('ai', 'core') AND c.relkind IN ('r', 'p')
   AND a.pid <> pg_backend_pid() AND a.xact_start < now() - make_interval(secs => :older)
 ORDER BY 2 DESC, 1, 3
 LIMIT 5
"""


def _holders(engine: Engine, older_than: float) -> str:
    """``"pid 123 (transaction open 45 s, ai.keyword_preset)"``, … or ``""`` (best effort)."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SET statement_timeout = '5s'"))
            rows = conn.execute(text(_HOLDERS_SQL), {"older": older_than}).all()
    except sa_exc.DBAPIError:
        return ""
    return ", ".join(f"pid {r.pid} (transaction open {r.seconds} s, {r.relation})" for r in rows)


def _with_retries(engine: Engine, config: MigrationConfig, attempt_once: Callable[[], object],
                  what: str, on_retry: RetryHook | None,
                  sleep: Callable[[float], None] = time.sleep) -> object:
    """Run ``attempt_once`` (one whole transaction) until it does not meet a lock timeout, at
    most ``config.attempts`` times.

    Raises:
        MigrationBusy: every attempt met a busy table (nothing was changed).
    """
    for attempt in range(1, config.attempts + 1):
        try:
            return attempt_once()
        except sa_exc.DBAPIError as exc:
            if not _is_lock_timeout(exc):
                raise
        if attempt < config.attempts:
            wait = config.wait(attempt)
            if on_retry is not None:
                on_retry(attempt, config.attempts, wait)
            sleep(wait)
    holders = _holders(engine, config.lock_timeout)
    raise MigrationBusy(
        f"a table is busy: {what} waited {config.lock_timeout:g} s for a table lock "
        f"{config.attempts} time(s) (PINLOG_MIGRATE_LOCK_TIMEOUT, PINLOG_MIGRATE_ATTEMPTS); "
        "nothing was changed and live traffic never waited longer than that. "
        + (f"Held by: {holders}. " if holders else "Another session holds a lock on one of "
           "our tables in a long transaction. ")
        + "Run it again when that transaction has ended.")


def _regclass(conn: Connection, name: str) -> bool:
    return conn.execute(text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar() is True


def inspect_database(conn: Connection) -> str:
    """``empty``, ``ours`` or ``foreign`` (module docstring)."""
    if _regclass(conn, f"{VERSION_SCHEMA}.alembic_version"):
        return "ours"
    if _legacy_history_is_ours(conn):
        return "ours"
    if _regclass(conn, "ai.context_ai_state"):
        return "foreign"
    return "empty"


#: Tables only our revision 0001 creates (the reference's schema has none of them): with the
#: revision ids, they tell our legacy ``public.alembic_version`` from a backend's own table whose
#: revision ids happen to look like ours (e.g. a hand-picked ``0001``).
_OUR_0001_TABLES = ("ai.keyword_preset_embedding", "ai.context_ai_event")


def _legacy_history_is_ours(conn: Connection) -> bool:
    """True when ``public.alembic_version`` is our own history from before our version table
    moved to ``ai``: it holds only our revision ids AND the database has the tables our 0001
    creates. A backend's Alembic table is never taken for ours (then the database is foreign
    and ``--adopt`` applies)."""
    if not _regclass(conn, "public.alembic_version"):
        return False
    legacy = conn.execute(text("SELECT version_num FROM public.alembic_version")).scalars().all()
    if not legacy or not set(legacy) <= _our_revisions():
        return False
    return all(_regclass(conn, table) for table in _OUR_0001_TABLES)


def owns_core(conn: Connection) -> bool:
    """False on an adopted database (the backend owns ``core``): revisions that touch ``core.*``
    must skip that part there (docs/ARCHITECTURE.md, "Migrations")."""
    if not _regclass(conn, "ai.adoption"):
        return True
    return conn.execute(text("SELECT count(*) FROM ai.adoption")).scalar() == 0


def _move_legacy_version_table(conn: Connection) -> bool:
    """Move our history from ``public.alembic_version`` (before this revision) to
    ``ai.alembic_version``; only when the legacy table holds OUR revision ids (a backend's own
    ``public.alembic_version`` is never touched). Returns True when it moved."""
    if _regclass(conn, f"{VERSION_SCHEMA}.alembic_version") or not _legacy_history_is_ours(conn):
        return False
    conn.execute(text(ENSURE_VERSION_SCHEMA))
    conn.execute(text(f"CREATE TABLE {VERSION_SCHEMA}.alembic_version ("
                      "version_num varchar(32) NOT NULL "
                      "CONSTRAINT alembic_version_pkc PRIMARY KEY)"))
    conn.execute(text(f"INSERT INTO {VERSION_SCHEMA}.alembic_version "
                      "SELECT version_num FROM public.alembic_version"))
    conn.execute(text("DROP TABLE public.alembic_version"))
    return True


def upgrade(url: str, revision: str = "head", *, config: MigrationConfig | None = None,
            on_retry: RetryHook | None = None) -> None:
    """Apply migrations up to ``revision`` in one transaction (idempotent), under the lock
    timeout of ``config`` (default :class:`MigrationConfig`), retried when a table is busy.

    Raises:
        AdoptionRequired: the ai tables exist but were created by another migration tool
            (run ``pinlog migrate --adopt``).
        MigrationBusy: every attempt met a busy table (nothing was changed).
    """
    config = config or MigrationConfig()
    engine = _engine(url)

    def attempt_once() -> None:
        with engine.begin() as conn:
            _lock(conn)
            _set_lock_timeout(conn, config)
            if inspect_database(conn) == "foreign":
                raise AdoptionRequired(
                    "the ai tables exist but were not created by pinlog's migrations "
                    "(an existing deployment): run `pinlog migrate --adopt --dry-run`, then "
                    "`pinlog migrate --adopt`")
            _move_legacy_version_table(conn)
            command.upgrade(alembic_config(url, conn), revision)

    try:
        _with_retries(engine, config, attempt_once, "`pinlog migrate`", on_retry)
    finally:
        engine.dispose()


def downgrade(url: str, revision: str = "base") -> None:
    """Revert migrations down to ``revision`` (refused on an adopted database by 0001)."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            _lock(conn)
            _move_legacy_version_table(conn)
            command.downgrade(alembic_config(url, conn), revision)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The applied revision (our version table; the legacy public one before it moved), or
    None when nothing of ours is applied."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            for table in (f"{VERSION_SCHEMA}.alembic_version", "public.alembic_version"):
                if _regclass(conn, table):
                    value = conn.execute(text(f"SELECT version_num FROM {table}")).scalar()
                    if table.startswith(VERSION_SCHEMA) or value in _our_revisions():
                        return value
            return None
    finally:
        engine.dispose()


# --- adoption (SPEC §2.2, last paragraph) -------------------------------------------------------

@dataclass
class AdoptionPlan:
    """What ``pinlog migrate --adopt`` does, in order; ``steps`` are ``(description, sql)``.

    ``kept`` lists what is deliberately left as the backend made it (printed by ``--dry-run``).
    """

    kind: str
    steps: list[tuple[str, str]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    revision_before: str | None = None

    def render(self) -> str:
        """Human-readable plan (``--dry-run`` output)."""
        lines = [f"database: {self.kind}"
                 + (f" (our revision {self.revision_before})" if self.revision_before else "")]
        if self.steps:
            lines.append("adopt, in one transaction:")
            lines += [f"  - {d}" for d, _ in self.steps]
        else:
            lines.append("adopt: nothing to add (the ai side already has everything it needs)")
        lines += [f"  = kept: {k}" for k in self.kept]
        lines.append(f"then: migrations {self.revision_before or ADOPTION_BASE} -> {head()} "
                     f"(version table {VERSION_SCHEMA}.alembic_version)")
        return "\n".join(lines)


def _our_table_ddl() -> dict[str, str]:
    """CREATE TABLE/INDEX statements of each of our ai tables, taken from revision 0001's
    script (one source of truth), keyed by table name."""
    import importlib.util

    path = revision_path(ADOPTION_BASE)
    spec = importlib.util.spec_from_file_location("pinlog_rev_0001", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out: dict[str, str] = {}
    for statement in module.UPGRADE.split(";\n"):
        body = "\n".join(line for line in statement.splitlines()
                         if not line.strip().startswith("--")).strip()
        found = re.search(r"(?:CREATE TABLE|ON) ai\.(\w+)", body)
        if found and body.startswith("CREATE"):
            out[found.group(1)] = (out.get(found.group(1), "") + body + ";\n")
    return out


#: Columns our ai side reads or writes, per table, with the ADD COLUMN definition used when an
#: adopted table lacks them (nullable or a constant default: metadata-only, no rewrite).
ADOPT_COLUMNS: dict[str, dict[str, str]] = {
    "context_ai_state": {
        "embedding_status": "text NOT NULL DEFAULT 'PENDING'",
        "keyword_status": "text NOT NULL DEFAULT 'PENDING'",
        "retry_count": "integer NOT NULL DEFAULT 0",
        "updated_at": "timestamptz NOT NULL DEFAULT now()",
        "rescanned_at": "timestamptz NULL",
        "last_error": "text NULL",
        "last_error_at": "timestamptz NULL",
    },
    "context_embedding": {
        "user_id": "bigint NULL", "record_id": "bigint NULL",
        "embedding_profile": "text NULL",
        # Rows embedded before the adoption have no hash: NULL = "trusted" (SPEC §5.6 rule in
        # pinlog.ai.pipeline; README "Adopting an existing deployment").
        "text_sha256": "bytea NULL",
        "is_deleted": "boolean NOT NULL DEFAULT false",
        "updated_at": "timestamptz NOT NULL DEFAULT now()",
    },
    "keyword_preset": {
        "display_name": "text NOT NULL DEFAULT ''",
        "category": "text NOT NULL DEFAULT 'SITUATION'",
        "description": "text NOT NULL DEFAULT ''",
        "examples": "text[] NOT NULL DEFAULT '{}'",
        "visibility": "text NOT NULL DEFAULT 'PUBLIC'",
        "is_active": "boolean NOT NULL DEFAULT true",
        "version": "integer NOT NULL DEFAULT 1",
    },
    "context_keyword": {"confidence": "numeric(4,3) NULL", "preset_version": "integer NOT NULL DEFAULT 1"},
    "context_keyword_analysis": {
        "preset_version": "integer NOT NULL DEFAULT 1",
        "unmatched_concepts": "jsonb NOT NULL DEFAULT '[]'::jsonb",
        "model_profile": "text NOT NULL DEFAULT 'unknown'",
        "updated_at": "timestamptz NOT NULL DEFAULT now()",
    },
}

_COLUMNS_SQL = """
SELECT a.attname, a.attnotnull, a.atthasdef, format_type(a.atttypid, a.atttypmod) AS type,
       a.atttypmod
  FROM pg_attribute a
 WHERE a.attrelid = to_regclass(:t) AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""


def plan_adoption(conn: Connection, dimension: int) -> AdoptionPlan:
    """Read the database and plan the adoption (changes nothing).

    Args:
        dimension: the configured embedding dimension (a fixed ``vector(N)`` column of another
            dimension is relaxed to ``vector``, SPEC §2.2; same dimension → left alone).
    Raises:
        NothingToAdopt: no ai tables at all (a fresh database: ``pinlog migrate``).
    """
    kind = inspect_database(conn)
    if kind == "empty":
        raise NothingToAdopt("no ai tables found: this is a fresh database, run `pinlog migrate`")
    plan = AdoptionPlan(kind)
    if kind == "ours":
        plan.revision_before = current_revision_on(conn)
        if not _regclass(conn, f"{VERSION_SCHEMA}.alembic_version"):
            plan.steps.append(("move our version table public.alembic_version -> "
                               f"{VERSION_SCHEMA}.alembic_version", "-- legacy move"))
        return plan
    ddl = _our_table_ddl()
    for table in REQUIRED_AI_TABLES:
        qualified = f"ai.{table}"
        if not _regclass(conn, qualified):
            plan.steps.append((f"create {qualified} (missing)", ddl[table]))
            continue
        columns = {r.attname: r for r in conn.execute(text(_COLUMNS_SQL), {"t": qualified})}
        for name, definition in ADOPT_COLUMNS.get(table, {}).items():
            if name not in columns:
                plan.steps.append((f"add column {qualified}.{name} {definition}",
                                   f"ALTER TABLE {qualified} ADD COLUMN IF NOT EXISTS {name} {definition}"))
        ours = set(ADOPT_COLUMNS.get(table, {})) | {"context_id", "id", "code", "keyword_id",
                                                    "embedding", "embedding_profile"}
        if table == "keyword_preset":
            ours -= {"embedding", "embedding_profile"}
        for name, row in columns.items():
            if name not in ours and row.attnotnull and not row.atthasdef:
                plan.steps.append((f"allow NULL in {qualified}.{name} (not written by our ai side)",
                                   f"ALTER TABLE {qualified} ALTER COLUMN {name} DROP NOT NULL"))
        if table == "context_embedding" and "embedding" in columns:
            typmod = columns["embedding"].atttypmod
            if typmod > 0 and typmod != dimension:
                plan.steps.append((f"relax ai.context_embedding.embedding {columns['embedding'].type} "
                                   f"-> vector (profile dimension {dimension}; no rewrite)",
                                   "ALTER TABLE ai.context_embedding ALTER COLUMN embedding TYPE vector"))
            elif typmod > 0:
                plan.kept.append(f"ai.context_embedding.embedding {columns['embedding'].type} "
                                 "(same dimension as the profile)")
        if table == "context_ai_state":
            checks = conn.execute(text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
                "'ai.context_ai_state'::regclass AND contype = 'c'")).scalars().all()
            plan.kept += [f"ai.context_ai_state {c} (the backend's rescan owns retry_count)"
                          for c in checks if "retry_count" in c]
    preset_columns = {r.attname for r in conn.execute(text(_COLUMNS_SQL), {"t": "ai.keyword_preset"})}
    if {"embedding", "embedding_profile"} <= preset_columns:
        plan.steps.append((
            "copy preset vectors stored on ai.keyword_preset into ai.keyword_preset_embedding "
            "(per profile; existing rows kept)",
            "INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, embedding) "
            "SELECT id, embedding_profile, embedding FROM ai.keyword_preset "
            "WHERE embedding IS NOT NULL AND embedding_profile IS NOT NULL "
            "ON CONFLICT (preset_id, embedding_profile) DO NOTHING"))
    plan.kept.append("schema core and every table outside ai.* (owned by the backend)")
    plan.kept.append("the backend's rows: statuses, retry_count and updated_at as they are "
                     "(migration 0005_stage_start_retry only fills our new *_start_retry columns of PROCESSING stages)")
    plan.steps.append(("record the adoption in ai.adoption (core is the backend's)",
                       "CREATE TABLE IF NOT EXISTS ai.adoption ("
                       " adopted_at timestamptz NOT NULL DEFAULT now(),"
                       " core_owner text NOT NULL DEFAULT 'backend');"
                       "INSERT INTO ai.adoption (core_owner) SELECT 'backend' "
                       "WHERE NOT EXISTS (SELECT 1 FROM ai.adoption)"))
    plan.steps.append((f"stamp {VERSION_SCHEMA}.alembic_version at {ADOPTION_BASE}", "-- stamp"))
    return plan


def current_revision_on(conn: Connection) -> str | None:
    """The applied revision read on ``conn`` (see :func:`current_revision`)."""
    for table in (f"{VERSION_SCHEMA}.alembic_version", "public.alembic_version"):
        if _regclass(conn, table):
            return conn.execute(text(f"SELECT version_num FROM {table}")).scalar()
    return None


async def database_revision(engine: AsyncEngine) -> str | None:
    """The revision in our version table (``ai.alembic_version``), read on a pooled connection
    (``/ready``: it must equal :func:`head`). Raises whatever the database raises (a missing
    table included): the caller treats any failure as "not ready"."""
    async with engine.connect() as conn:
        return (await conn.execute(
            text(f"SELECT version_num FROM {VERSION_SCHEMA}.alembic_version"))).scalar()


def adopt(url: str, dimension: int, *, dry_run: bool = False,
          config: MigrationConfig | None = None,
          on_retry: RetryHook | None = None) -> AdoptionPlan:
    """``pinlog migrate --adopt``: plan, and unless ``dry_run`` apply the plan, stamp and
    upgrade to head, in ONE transaction (idempotent: a second run finds nothing to add).

    Never drops, rewrites or renames anything of the backend's; every lock is taken with the
    ``lock_timeout`` of ``config`` (a busy table aborts the attempt, nothing changed; the run is
    retried like :func:`upgrade`). Raises :class:`NothingToAdopt` on a fresh database,
    :class:`MigrationBusy` when every attempt met a busy table.
    """
    config = config or MigrationConfig()
    engine = _engine(url)
    try:
        plan = _with_retries(engine, config, lambda: _adopt_once(engine, url, dimension, dry_run,
                                                                 config),
                             "`pinlog migrate --adopt`", on_retry)
        assert isinstance(plan, AdoptionPlan)
        return plan
    finally:
        engine.dispose()


def _adopt_once(engine: Engine, url: str, dimension: int, dry_run: bool,
                config: MigrationConfig) -> AdoptionPlan:
    """One attempt of :func:`adopt`: one transaction."""
    with engine.begin() as conn:
        _lock(conn)
        _set_lock_timeout(conn, config)
        plan = plan_adoption(conn, dimension)
        if dry_run:
            conn.rollback()
            return plan
        if plan.kind == "ours":
            _move_legacy_version_table(conn)
        else:
            for _, sql in plan.steps:
                if not sql.startswith("--"):
                    conn.execute(text(sql))
            conn.execute(text(f"CREATE TABLE IF NOT EXISTS {VERSION_SCHEMA}.alembic_version ("
                              "version_num varchar(32) NOT NULL "
                              "CONSTRAINT alembic_version_pkc PRIMARY KEY)"))
            conn.execute(text(f"INSERT INTO {VERSION_SCHEMA}.alembic_version VALUES (:r)"),
                         {"r": ADOPTION_BASE})
        command.upgrade(alembic_config(url, conn), "head")
        return plan
