"""Keyword presets carry cues; the keyword analysis records the judge's evidence (SPEC §8).

* ``ai.keyword_preset.cues text[] NOT NULL DEFAULT '{}'``: words/stems that state the preset
  outright (lexical evidence of the ``similarity`` judge, shown to the ``llm`` judge). Part of
  the preset's content: a change is a new preset version (computed by the loader).
* ``ai.context_keyword_analysis.evidence jsonb NOT NULL DEFAULT '[]'``: per pick and near miss
  the score, the cues hit and why (analysis only, never shown to members).
"""

from alembic import op

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0003_issue11_presets"
down_revision = "0004_issue16_robustness"


def upgrade() -> None:
    op.execute("ALTER TABLE ai.keyword_preset "
               "ADD COLUMN IF NOT EXISTS cues text[] NOT NULL DEFAULT '{}'")
    op.execute("ALTER TABLE ai.context_keyword_analysis "
               "ADD COLUMN IF NOT EXISTS evidence jsonb NOT NULL DEFAULT '[]'::jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE ai.context_keyword_analysis DROP COLUMN IF EXISTS evidence")
    op.execute("ALTER TABLE ai.keyword_preset DROP COLUMN IF EXISTS cues")
