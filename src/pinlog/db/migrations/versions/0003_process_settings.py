"""Process settings registry (issue 16 #7): each process records the settings the rules depend
on (expiries, retries, timeouts, attempts, backoff, embedding profile) at start-up, so replicas
with different timings are detected (ERROR log, ``pinlog status``).
"""

from alembic import op

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0004_issue16_robustness"
down_revision = "0002_issue10_lexical"


def upgrade() -> None:
    op.execute("""
CREATE TABLE ai.process_settings (
    process_id  text PRIMARY KEY,
    host        text NOT NULL,
    pid         integer NOT NULL,
    components  text NOT NULL,
    settings    jsonb NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX process_settings_seen_idx ON ai.process_settings (seen_at);
""")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS ai.process_settings")
