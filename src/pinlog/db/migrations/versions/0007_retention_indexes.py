"""Indexes the retention job reads (issue 31: deleted notes, their AI data and old history are
hard-deleted past their retention, in small batches, oldest first).

ai (both kinds of database):

* ``ai.context_ai_state_cancelled_idx`` — ``(updated_at, context_id)`` of the rows whose two
  stages are CANCELLED: the purge picks the oldest cancellations in key order
  (``ai/retention.sql`` → ``pick_cancelled_contexts``), O(batch) however many live rows exist.
* ``ai.context_ai_event_at_idx`` — ``(at, id)``: old history rows, oldest first
  (``purge_old_events``); the table is append-only and the largest per context.

core (skipped on an adopted database, whose ``core`` is the backend's):

* ``core.context_deleted_idx``, ``core.record_deleted_idx``, ``core.member_deleted_idx`` —
  ``(deleted_at, id)`` of soft-deleted rows (``core/retention.sql``).
* ``core.context_record_all_idx``, ``core.context_member_all_idx``,
  ``core.record_member_all_idx`` — the foreign-key columns over *all* rows: deleting a record or
  a member makes PostgreSQL look for referencing rows, and the existing indexes on these
  columns are partial (active rows only), so without these each delete would scan the table.

Plain ``CREATE INDEX IF NOT EXISTS`` inside the migration's transaction: it blocks writes to
the table while the index builds (seconds per million rows).
"""

from alembic import op

revision = "0007_retention_indexes"
down_revision = "0005_preset_categories"

AI_INDEXES = {
    "ai.context_ai_state_cancelled_idx":
        "ON ai.context_ai_state (updated_at, context_id) "
        "WHERE embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'",
    "ai.context_ai_event_at_idx": "ON ai.context_ai_event (at, id)",
}
CORE_INDEXES = {
    "core.context_deleted_idx": "ON core.context (deleted_at, id) WHERE deleted_at IS NOT NULL",
    "core.record_deleted_idx": "ON core.record (deleted_at, id) WHERE deleted_at IS NOT NULL",
    "core.member_deleted_idx": "ON core.member (deleted_at, id) WHERE deleted_at IS NOT NULL",
    "core.context_record_all_idx": "ON core.context (record_id)",
    "core.context_member_all_idx": "ON core.context (member_id)",
    "core.record_member_all_idx": "ON core.record (member_id)",
}


def _create(indexes: dict[str, str]) -> None:
    for qualified, definition in indexes.items():
        name = qualified.split(".", 1)[1]
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} {definition}")


def _drop(indexes: dict[str, str]) -> None:
    for qualified in indexes:
        op.execute(f"DROP INDEX IF EXISTS {qualified}")


def upgrade() -> None:
    from pinlog.db.migrate import owns_core

    _create(AI_INDEXES)
    if owns_core(op.get_bind()):  # an adopted database: core is the backend's (issue 14)
        _create(CORE_INDEXES)


def downgrade() -> None:
    from pinlog.db.migrate import owns_core

    _drop(AI_INDEXES)
    if owns_core(op.get_bind()):
        _drop(CORE_INDEXES)
