"""Preset categories beyond the reference's four (SPEC §8: "a preset file may define more; the
reference system is moving to seven").

Drops the CHECK that allowed only COMPANION, ACTIVITY, ATMOSPHERE and SITUATION; the preset-file
parser (``pinlog.ai.presets.parse_presets``) now accepts any UPPER_SNAKE_CASE name. No new CHECK
takes its place in the database: on an adopted deployment the backend writes this table too and
its categories are free text. Metadata only; works on both kinds of database (the adopted one
never had the constraint).
"""

from alembic import op

# The id is older than the file name (files were renamed into chain order) and is kept:
# deployed databases store it in ai.alembic_version (docs/ARCHITECTURE.md "Migrations").
revision = "0005_preset_categories"
down_revision = "0002_issue14_adopt"


def upgrade() -> None:
    op.execute("ALTER TABLE ai.keyword_preset DROP CONSTRAINT IF EXISTS keyword_preset_category_check")


def downgrade() -> None:
    # NOT VALID: rows loaded with another category stay; new writes must use the four again
    op.execute("""
ALTER TABLE ai.keyword_preset ADD CONSTRAINT keyword_preset_category_check
    CHECK (category IN ('COMPANION','ACTIVITY','ATMOSPHERE','SITUATION')) NOT VALID
""")
