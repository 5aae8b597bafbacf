"""The ai side's own lexical evidence (SPEC §10 "The same decision for adopters"; issue 28).

``ai.context_lexical`` holds, per context, the lexical terms (:func:`pinlog.text.lexical_terms`)
of the text and of the ``placeMeta`` name/address the ai side received in the process request,
so ``/internal/v1/search`` can give a backend without a lexical channel of its own the same
decision as core's search. The row is written in the embedding's save transaction under the
same guard (``ai/state.sql`` → ``upsert_lexical``), replaced with it, and read only through the
embedding's filters (member, not deleted, COMPLETED, profile: ``ai/search.sql`` →
``lexical_matches``), so it is invalidated exactly with the embedding. One row per context, keyed
by ``context_id`` (retention purges it with the context's other ai rows). Nothing is read from
``core.*``: contexts embedded before this revision have no row until they are processed again
(``pinlog reprocess --profile``). ai only: runs on adopted databases too.
"""

from alembic import op

revision = "0011_ai_lexical_terms"
down_revision = "0010_claim_owner"


def upgrade() -> None:
    op.execute("""
CREATE TABLE IF NOT EXISTS ai.context_lexical (
    context_id  bigint PRIMARY KEY,
    user_id     bigint NOT NULL,
    record_id   bigint NOT NULL,
    note_terms  tsvector NOT NULL,
    place_terms tsvector NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
)""")
    op.execute("CREATE INDEX IF NOT EXISTS context_lexical_user_idx ON ai.context_lexical (user_id)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS ai.context_lexical")
