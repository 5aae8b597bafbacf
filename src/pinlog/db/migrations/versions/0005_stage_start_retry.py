"""Re-claim after the backend's rescan: what each stage's start recorded (SPEC §7.3, last paragraph).

A backend that keeps the reference's rescan refreshes ``updated_at`` on every claim, so a crashed
PROCESSING stage is never re-claimed by age alone. The guarded start (ai/state.sql) now records
the row's ``retry_count`` at start per stage; a re-send whose ``retry_count`` is higher means the
backend gave the old attempt up, and the start may re-claim the stage.

Works on both kinds of database (ours and adopted): it only adds nullable ai columns
(metadata-only, no rewrite) and backfills the stages that are PROCESSING right now with their
current ``retry_count`` (their start was not recorded; the next rescan claim then re-claims them).
"""

from alembic import op

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0002_issue14_adopt"
down_revision = "0003_issue11_presets"

UPGRADE = """
ALTER TABLE ai.context_ai_state
    ADD COLUMN IF NOT EXISTS embedding_start_retry integer NULL,
    ADD COLUMN IF NOT EXISTS keyword_start_retry integer NULL;
COMMENT ON COLUMN ai.context_ai_state.embedding_start_retry IS
    'retry_count when the embedding stage last started (ai side; SPEC 7.3 re-claim)';
COMMENT ON COLUMN ai.context_ai_state.keyword_start_retry IS
    'retry_count when the keyword stage last started (ai side; SPEC 7.3 re-claim)';
UPDATE ai.context_ai_state SET embedding_start_retry = retry_count
 WHERE embedding_status = 'PROCESSING' AND embedding_start_retry IS NULL;
UPDATE ai.context_ai_state SET keyword_start_retry = retry_count
 WHERE keyword_status = 'PROCESSING' AND keyword_start_retry IS NULL;
"""

DOWNGRADE = """
ALTER TABLE ai.context_ai_state
    DROP COLUMN IF EXISTS embedding_start_retry,
    DROP COLUMN IF EXISTS keyword_start_retry;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
