"""Lexical search channel (SPEC §10): analysed terms of note bodies and of saved places.

``core.context.lexemes`` holds the terms of the note body and ``core.place.lexemes`` those of
the place's name, address and road address, both as ``tsvector`` built from
:func:`pinlog.text.lexical_terms` (character bigrams of Hangul, lower-cased Latin words);
``core.record.place_lexemes`` is a copy of its place's terms, so that search reads only the
member's own rows. core fills them when it writes the row (a context body and a place are
immutable, so they are never recomputed); existing rows are backfilled here, in batches. NULL
means "no terms" (such a row never matches lexically).

No GIN index: search reads the member's rows through the existing member indexes and tests
them with ``@@`` (O(the member's rows)); a GIN index over every member's terms was measured
slower at 1M rows, since a common term's posting list is mostly other members' rows
(``bench/bench_search.py``, README "Search").
"""

from alembic import op
from sqlalchemy import text

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0002_issue10_lexical"
down_revision = "0001"

BATCH = 1000


def _backfill(table: str, columns: str) -> None:
    from pinlog.text import lexical_terms

    conn = op.get_bind()
    last = 0
    while True:
        rows = conn.execute(text(
            f"SELECT id, concat_ws(' ', {columns}) FROM {table} "
            "WHERE id > :last AND lexemes IS NULL ORDER BY id LIMIT :batch"),
            {"last": last, "batch": BATCH}).all()
        if not rows:
            return
        for row_id, body in rows:
            conn.execute(text(f"UPDATE {table} SET lexemes = array_to_tsvector(CAST(:terms AS text[])) "
                              "WHERE id = :id"), {"terms": lexical_terms(body or ""), "id": row_id})
        last = rows[-1][0]


def upgrade() -> None:
    from pinlog.db.migrate import owns_core

    if not owns_core(op.get_bind()):
        return  # an adopted database: core is the backend's, not ours to change (issue 14)
    op.execute("ALTER TABLE core.context ADD COLUMN IF NOT EXISTS lexemes tsvector NULL")
    op.execute("ALTER TABLE core.place ADD COLUMN IF NOT EXISTS lexemes tsvector NULL")
    op.execute("ALTER TABLE core.record ADD COLUMN IF NOT EXISTS place_lexemes tsvector NULL")
    _backfill("core.context", "body")
    _backfill("core.place", "name, address, road_address")
    op.execute("UPDATE core.record AS r SET place_lexemes = p.lexemes FROM core.place AS p "
               "WHERE p.id = r.place_id AND r.place_lexemes IS NULL")


def downgrade() -> None:
    from pinlog.db.migrate import owns_core

    if not owns_core(op.get_bind()):
        return  # an adopted database: nothing of core was added (issue 14)
    op.execute("ALTER TABLE core.record DROP COLUMN IF EXISTS place_lexemes")
    op.execute("ALTER TABLE core.context DROP COLUMN IF EXISTS lexemes")
    op.execute("ALTER TABLE core.place DROP COLUMN IF EXISTS lexemes")
