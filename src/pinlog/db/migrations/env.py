"""Alembic environment: the URL comes from the caller (``pinlog migrate``), never from a file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

# Our history lives in our own schema (ai.alembic_version), never in public or in a backend's
# version table (SPEC §2.2; pinlog.db.migrate).
from pinlog.db.migrate import ENSURE_VERSION_SCHEMA, MIGRATION_LOCK_KEY, VERSION_SCHEMA

config = context.config
url = config.attributes.get("sqlalchemy_url") or config.get_main_option("sqlalchemy.url")


def _run_locked(connection: Connection) -> None:
    """Run the migrations in one transaction that first takes the migration advisory lock
    (``pg_advisory_xact_lock``, released at commit/rollback): concurrent ``pinlog migrate`` runs
    on one database wait for each other, and the later ones read the version table only after
    the first committed, so they find it at head and do nothing (no unique violation).
    The version table's schema is created first (the table is created before revision 0001)."""
    context.configure(connection=connection, version_table_schema=VERSION_SCHEMA)
    with context.begin_transaction():
        context.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
        context.execute(ENSURE_VERSION_SCHEMA)
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run_locked(connectable)
        return
    if not url:
        raise RuntimeError("no database URL given to the migrations (pinlog.db.migrate passes it)")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run_locked(connection)
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=url, literal_binds=True, version_table_schema=VERSION_SCHEMA)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
