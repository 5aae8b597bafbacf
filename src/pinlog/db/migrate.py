"""Programmatic Alembic: ``pinlog migrate`` and the tests use these (core owns migrations, SPEC §2)."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, pool

from pinlog.db.engine import sqlalchemy_url

HEAD = "0003_issue11_presets"

#: Key of the PostgreSQL advisory lock every migration run holds (transaction-scoped, per
#: database): replicas that run ``pinlog migrate`` at the same time wait for each other instead
#: of racing on the version table; the later ones then find the schema at head (no-op).
#: The value is the bytes of "pinlog:m" read as a signed 64-bit integer.
MIGRATION_LOCK_KEY = int.from_bytes(b"pinlog:m", "big", signed=True)
REQUIRED_AI_TABLES = (
    "context_ai_state", "context_embedding", "keyword_preset", "keyword_preset_embedding",
    "context_keyword", "context_keyword_analysis", "context_ai_event",
)


def alembic_config(url: str) -> Config:
    """An Alembic config for the database at ``url`` (libpq or SQLAlchemy form)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("pinlog.db").joinpath("migrations")))
    cfg.attributes["sqlalchemy_url"] = sqlalchemy_url(url)
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (idempotent). Concurrent calls on one database are
    serialised by the advisory lock :data:`MIGRATION_LOCK_KEY` (all succeed)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Revert migrations down to ``revision``."""
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The applied revision, or None on an empty database."""
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version", schema="public"):
                return None
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    finally:
        engine.dispose()
