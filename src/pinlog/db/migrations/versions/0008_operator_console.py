"""Operator console (issue 29): what its pages read without a full scan, and its action log.

* ``ai.process_settings.version`` (both kinds of database): the ``pinlog`` version of each live
  process, for the console's replicas page (a rolling upgrade shows two versions; a version is
  not a rule-relevant setting, so it is never compared).
* On databases whose core is ours only (``owns_core``; on an adopted database nothing of ours
  reads these, and the backend's writes must not pay for them):

  - **state counts, maintained** (SPEC §12: state rows per stage × status): ``ai.state_count``
    (stage, status → rows) plus the append-only ``ai.state_count_delta``, written by three
    statement-level triggers on ``ai.context_ai_state`` (INSERT, UPDATE, DELETE; transition
    tables, so a 500-row batch is one insert of at most 20 rows) and reset by a TRUNCATE trigger.
    A reader sums both (O(deltas since the last compaction), not O(table)); core's
    ``compact_state_counts`` (``core/status.sql``) folds the deltas into ``ai.state_count``.
    Inserting a delta takes no lock another writer waits for (no hot counter row). The counts
    are initialised here, after the triggers exist: ``CREATE TRIGGER`` holds a lock that keeps
    writers out until this transaction commits, so no change is missed or counted twice.
  - ``ai.context_ai_state_failed_idx`` and ``…_failure_reason_idx``: partial indexes of the
    rows that ended with a FAILED stage (none left to run), by time and by last error (the
    console's failures; by reason read from the index alone) — O(failed rows), not O(table).
    A dead end waiting for the finalizer is not in them: so the rescan's statements (which read
    unfinished rows) keep planning on the partial rescan index.
  - ``ai.context_ai_event_finished_at_idx``: partial index of the events that finished a stage
    (COMPLETED, FAILED), by time — the completed-per-minute chart reads the last hour only.
  - ``core.console_action``: every confirmed console action (who: the role; what; its
    parameters and outcome as JSON; never note text).

Index builds read the whole table once (here, under the migration lock).
"""

from alembic import op

revision = "0008_operator_console"
down_revision = "0007_retention_indexes"

STATE_COUNTS = """
CREATE TABLE IF NOT EXISTS ai.state_count (
    stage  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (stage, status)
);
CREATE TABLE IF NOT EXISTS ai.state_count_delta (
    stage  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL
);

-- SPEC §12: rows per stage x status, maintained by every writer of ai.context_ai_state (core,
-- ai, the rescan, the finalizer, a manual fix) in the writer's own transaction: a rolled-back
-- change leaves no delta. One statement = one INSERT of its net changes.
CREATE OR REPLACE FUNCTION ai.state_count_track() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ai.state_count_delta (stage, status, n)
        SELECT 'embedding', embedding_status, count(*) FROM new_rows GROUP BY embedding_status
        UNION ALL
        SELECT 'keyword', keyword_status, count(*) FROM new_rows GROUP BY keyword_status;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO ai.state_count_delta (stage, status, n)
        SELECT 'embedding', embedding_status, -count(*) FROM old_rows GROUP BY embedding_status
        UNION ALL
        SELECT 'keyword', keyword_status, -count(*) FROM old_rows GROUP BY keyword_status;
    ELSE
        INSERT INTO ai.state_count_delta (stage, status, n)
        SELECT stage, status, sum(n) FROM (
            SELECT 'embedding' AS stage, embedding_status AS status, 1 AS n FROM new_rows
            UNION ALL SELECT 'keyword', keyword_status, 1 FROM new_rows
            UNION ALL SELECT 'embedding', embedding_status, -1 FROM old_rows
            UNION ALL SELECT 'keyword', keyword_status, -1 FROM old_rows
        ) AS changes
        GROUP BY stage, status
        HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION ai.state_count_reset() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ai.state_count;
    DELETE FROM ai.state_count_delta;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS state_count_insert ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_update ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_delete ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_truncate ON ai.context_ai_state;
CREATE TRIGGER state_count_insert AFTER INSERT ON ai.context_ai_state
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ai.state_count_track();
CREATE TRIGGER state_count_update AFTER UPDATE ON ai.context_ai_state
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ai.state_count_track();
CREATE TRIGGER state_count_delete AFTER DELETE ON ai.context_ai_state
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ai.state_count_track();
CREATE TRIGGER state_count_truncate AFTER TRUNCATE ON ai.context_ai_state
    FOR EACH STATEMENT EXECUTE FUNCTION ai.state_count_reset();

-- the starting point, read after the triggers exist (their lock keeps writers out until commit)
DELETE FROM ai.state_count;
DELETE FROM ai.state_count_delta;
INSERT INTO ai.state_count (stage, status, n)
SELECT 'embedding', embedding_status, count(*) FROM ai.context_ai_state GROUP BY embedding_status
UNION ALL
SELECT 'keyword', keyword_status, count(*) FROM ai.context_ai_state GROUP BY keyword_status;
"""

CONSOLE = """
-- rows that ended with a FAILED stage (nothing left to run: a dead end still waiting for the
-- finalizer is excluded, so the rescan's statements, which read unfinished rows, cannot use these)
CREATE INDEX IF NOT EXISTS context_ai_state_failed_idx
    ON ai.context_ai_state (updated_at)
    WHERE (embedding_status = 'FAILED' OR keyword_status = 'FAILED')
      AND embedding_status NOT IN ('PENDING', 'PROCESSING')
      AND keyword_status NOT IN ('PENDING', 'PROCESSING');
-- failures by reason read from the index alone (console.sql's failure_reasons)
CREATE INDEX IF NOT EXISTS context_ai_state_failure_reason_idx
    ON ai.context_ai_state (last_error, updated_at)
    WHERE (embedding_status = 'FAILED' OR keyword_status = 'FAILED')
      AND embedding_status NOT IN ('PENDING', 'PROCESSING')
      AND keyword_status NOT IN ('PENDING', 'PROCESSING');
CREATE INDEX IF NOT EXISTS context_ai_event_finished_at_idx
    ON ai.context_ai_event (at) INCLUDE (stage, to_status)
    WHERE to_status IN ('COMPLETED', 'FAILED');
CREATE TABLE IF NOT EXISTS core.console_action (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    role     text NOT NULL CONSTRAINT console_action_role_check CHECK (role IN ('admin', 'read')),
    action   text NOT NULL,
    params   jsonb NOT NULL DEFAULT '{}'::jsonb,
    outcome  jsonb NOT NULL DEFAULT '{}'::jsonb,
    request_id text NULL
);
"""


def upgrade() -> None:
    from pinlog.db.migrate import owns_core

    op.execute("ALTER TABLE ai.process_settings ADD COLUMN IF NOT EXISTS version text NULL")
    if not owns_core(op.get_bind()):
        return  # an adopted database: nothing of ours reads these; the backend's writes stay as they were
    op.execute(STATE_COUNTS)
    op.execute(CONSOLE)


def downgrade() -> None:
    from pinlog.db.migrate import owns_core

    if owns_core(op.get_bind()):
        op.execute("""
DROP TABLE IF EXISTS core.console_action;
DROP INDEX IF EXISTS ai.context_ai_event_finished_at_idx;
DROP INDEX IF EXISTS ai.context_ai_state_failure_reason_idx;
DROP INDEX IF EXISTS ai.context_ai_state_failed_idx;
DROP TRIGGER IF EXISTS state_count_insert ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_update ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_delete ON ai.context_ai_state;
DROP TRIGGER IF EXISTS state_count_truncate ON ai.context_ai_state;
DROP FUNCTION IF EXISTS ai.state_count_track();
DROP FUNCTION IF EXISTS ai.state_count_reset();
DROP TABLE IF EXISTS ai.state_count_delta, ai.state_count;
""")
    op.execute("ALTER TABLE ai.process_settings DROP COLUMN IF EXISTS version")
