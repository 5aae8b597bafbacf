"""What several revision scripts write alike (``versions/*.py`` import it; alembic does not load
this module as a revision: it lies outside ``versions/``).

The text these functions return is part of a revision's DDL: a change here changes what every
revision using it runs, on databases that upgrade from before it
(``tests/integration/test_upgrade_from_each_revision.py``). Keep the output byte-for-byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alembic import op

#: ``(column, type and nullability, comment)``; the comment is put in single quotes as given.
Column = tuple[str, str, str]


def add_columns(table: str, columns: Sequence[Column]) -> str:
    """``ALTER TABLE {table}`` adding each column ``IF NOT EXISTS`` (one statement, nullable
    columns only → metadata-only, no rewrite), then one ``COMMENT ON COLUMN`` per column; each
    statement ends with ``;`` and a line break."""
    adds = ",\n".join(f"    ADD COLUMN IF NOT EXISTS {name} {kind}" for name, kind, _ in columns)
    comments = "".join(f"COMMENT ON COLUMN {table}.{name} IS\n    '{comment}';\n"
                       for name, _, comment in columns)
    return f"ALTER TABLE {table}\n{adds};\n{comments}"


def drop_columns(table: str, names: Sequence[str]) -> str:
    """``ALTER TABLE {table}`` dropping each column ``IF EXISTS`` (one statement), ending with
    ``;`` and a line break: the downgrade of :func:`add_columns`."""
    drops = ",\n".join(f"    DROP COLUMN IF EXISTS {name}" for name in names)
    return f"ALTER TABLE {table}\n{drops};\n"


def run_sql(upgrade: str, downgrade: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """A revision's ``(upgrade, downgrade)`` functions that each execute one SQL text:
    ``upgrade, downgrade = run_sql(UPGRADE, DOWNGRADE)`` at a script's module level."""

    def run_upgrade() -> None:
        op.execute(upgrade)

    def run_downgrade() -> None:
        op.execute(downgrade)

    return run_upgrade, run_downgrade
