"""Claims know their owner (SPEC §7.3.1, issue 26): re-send the work of a dead or stopped process
in seconds, not after the expiry.

* ``ai.context_ai_state.owner`` / ``owned_at``: the process responsible for the row's current
  work and when it took it — core records its process when it creates the row (the sender of
  its PENDING work), the rescan when it claims the row, the ai side when its guarded start
  claims a stage. The record counts only while ``owned_at`` is at least the row's rescan age
  ``greatest(updated_at, rescanned_at)``: any later status change or claim by a process that
  does not record owners (an older version, the reference backend) makes the owner unknown, and
  then the expiry stays the backstop.
* ``ai.process_settings.alive_until``: the lease each heartbeat extends (and a clean stop ends).
* ``context_ai_state_owner_idx``: the unfinished rows by owner, so the rescan finds the rows of
  the few gone processes without walking every unfinished row (its predicate is the rescan
  index's, verbatim).

Works on both kinds of database (ours and adopted): nullable ai columns only (metadata, no
rewrite; NULL = owner unknown, exactly the rows claimed before the upgrade) and an index on ai.
"""

from pinlog.db.migrations.ddl import add_columns, drop_columns, run_sql

revision = "0010_claim_owner"
down_revision = "0009_profiles_side_by_side"

OWNER_COLUMNS = [
    ("owner", "text NULL",
     "process (ai.process_settings.process_id) responsible for the current work (SPEC 7.3.1)"),
    ("owned_at", "timestamptz NULL",
     "when that process took the work; the owner counts only while owned_at >= the rescan age"),
]
LEASE_COLUMNS = [
    ("alive_until", "timestamptz NULL",
     "lease: the process is live until then (heartbeat + its PINLOG_HEARTBEAT_TIMEOUT; a clean "
     "stop ends it)"),
]

UPGRADE = ("\n" + add_columns("ai.context_ai_state", OWNER_COLUMNS)
           + add_columns("ai.process_settings", LEASE_COLUMNS) + """\
CREATE INDEX IF NOT EXISTS context_ai_state_owner_idx
    ON ai.context_ai_state (owner)
    WHERE embedding_status IN ('PENDING','PROCESSING') OR keyword_status IN ('PENDING','PROCESSING');
""")

DOWNGRADE = """
DROP INDEX IF EXISTS ai.context_ai_state_owner_idx;
ALTER TABLE ai.process_settings DROP COLUMN IF EXISTS alive_until;
""" + drop_columns("ai.context_ai_state", [name for name, _, _ in OWNER_COLUMNS])

upgrade, downgrade = run_sql(UPGRADE, DOWNGRADE)
