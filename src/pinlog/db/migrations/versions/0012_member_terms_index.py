"""core's lexical channel reads the member's matching rows through an index (SPEC §10; issue 28
"bound the lexical candidates").

``core/search.sql`` → ``lexical_matches`` used to read every active note and record of the
member through the member indexes and test each row's terms with ``@@`` — O(the member's rows),
each row against every search term (18 ms median, 35 ms p95 at 10,000 notes of one member,
``bench/bench_search.py``). A GIN index over the plain terms was slower: a common term's posting
list is mostly other members' rows. These indexes key every term by its member instead:

* ``core.member_terms(member_id, lexemes)`` — the row's terms as ``'<member id> <term>'``
  (``text[]``; a term never contains a space, :func:`pinlog.text.lexical_terms`), ``IMMUTABLE``;
  its ``COST`` tells the planner that evaluating it per row is dear (so it reads the index, not
  the member's rows), ``PARALLEL RESTRICTED`` keeps the statement in one process (the search's
  query embedding needs the other cores);
* ``core.context_member_terms_idx`` (notes) and ``core.record_member_terms_idx`` (the records'
  saved places), GIN over that expression, active rows only.

A posting list then holds only the member's own rows that contain the term: the statement reads
the rows that match, not the member's rows. The rows found are exactly those ``@@`` finds
(``lexemes @@ 't1' | 't2' …`` ⇔ the terms overlap), and ``@@`` stays in the statement as the
filter of what the index found. core only: skipped on an adopted database. Plain ``CREATE
INDEX`` inside the migration's transaction: it blocks writes to the two tables while it builds
(about 3 s per million notes here).

The indexes store the function's keys: a later revision that changes ``core.member_terms`` must
create it under a new name (or ``REINDEX`` both indexes in the same revision) — ``CREATE OR
REPLACE`` alone would leave the indexes holding the old keys.
"""

from alembic import op

revision = "0012_member_terms_index"
down_revision = "0011_ai_lexical_terms"

FUNCTION = """
CREATE OR REPLACE FUNCTION core.member_terms(member_id bigint, terms tsvector) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL RESTRICTED COST 10000 AS
$$ SELECT ARRAY(SELECT member_id::text || ' ' || t FROM unnest(tsvector_to_array(terms)) AS t) $$
"""


def upgrade() -> None:
    from pinlog.db.migrate import owns_core

    if not owns_core(op.get_bind()):
        return  # an adopted database: core is the backend's, not ours to change (issue 14)
    op.execute(FUNCTION)
    op.execute("CREATE INDEX IF NOT EXISTS context_member_terms_idx ON core.context USING gin "
               "(core.member_terms(member_id, lexemes)) WHERE deleted_at IS NULL")
    op.execute("CREATE INDEX IF NOT EXISTS record_member_terms_idx ON core.record USING gin "
               "(core.member_terms(member_id, place_lexemes)) WHERE deleted_at IS NULL")
    op.execute("ANALYZE core.context")
    op.execute("ANALYZE core.record")


def downgrade() -> None:
    from pinlog.db.migrate import owns_core

    if not owns_core(op.get_bind()):
        return  # an adopted database: nothing of ours was created in core
    op.execute("DROP INDEX IF EXISTS core.context_member_terms_idx")
    op.execute("DROP INDEX IF EXISTS core.record_member_terms_idx")
    op.execute("DROP FUNCTION IF EXISTS core.member_terms(bigint, tsvector)")
