"""Alembic environment: the URL comes from the caller (``pinlog migrate``), never from a file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

config = context.config
url = config.attributes.get("sqlalchemy_url") or config.get_main_option("sqlalchemy.url")


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, version_table_schema="public")
        with context.begin_transaction():
            context.run_migrations()
        return
    if not url:
        raise RuntimeError("no database URL given to the migrations (pinlog.db.migrate passes it)")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, version_table_schema="public")
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=url, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
