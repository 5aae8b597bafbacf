"""Re-claim after the backend's rescan: what each stage's start recorded (SPEC §7.3, last paragraph).

A backend that keeps the reference's rescan refreshes ``updated_at`` on every claim, so a crashed
PROCESSING stage is never re-claimed by age alone. The guarded start (ai/state.sql) now records
the row's ``retry_count`` at start per stage; a re-send whose ``retry_count`` is higher means the
backend gave the old attempt up, and the start may re-claim the stage.

Works on both kinds of database (ours and adopted): it only adds nullable ai columns
(metadata-only, no rewrite) and backfills the stages that are PROCESSING right now with their
current ``retry_count`` (their start was not recorded; the next rescan claim then re-claims them).
"""

from pinlog.db.migrations.ddl import add_columns, drop_columns, run_sql

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0002_issue14_adopt"
down_revision = "0003_issue11_presets"

COLUMNS = [(f"{stage}_start_retry", "integer NULL",
            f"retry_count when the {stage} stage last started (ai side; SPEC 7.3 re-claim)")
           for stage in ("embedding", "keyword")]

UPGRADE = "\n" + add_columns("ai.context_ai_state", COLUMNS) + """\
UPDATE ai.context_ai_state SET embedding_start_retry = retry_count
 WHERE embedding_status = 'PROCESSING' AND embedding_start_retry IS NULL;
UPDATE ai.context_ai_state SET keyword_start_retry = retry_count
 WHERE keyword_status = 'PROCESSING' AND keyword_start_retry IS NULL;
"""

DOWNGRADE = "\n" + drop_columns("ai.context_ai_state", [name for name, _, _ in COLUMNS])

upgrade, downgrade = run_sql(UPGRADE, DOWNGRADE)
