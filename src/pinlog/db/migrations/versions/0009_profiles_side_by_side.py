"""Embedding profiles side by side (SPEC §9.1, issue 24): switch models with no search outage.

* ``ai.embedding_profile`` — one row per profile the switch knows: its role (``active``: what
  search, keywords and the embedding stage use; ``building``: vectors made beside it by the
  backfill; ``kept``: an earlier profile whose vectors are kept, so activating it again is the
  rollback), the backfill's resumable cursor and progress, the activation time. At most one
  ``active`` and one ``building`` row (a partial unique index on the role). No row at all = the
  replicas' configured profile is active (as before this revision).
* ``ai.context_embedding_shadow`` — the vectors of every profile but the active one, keyed
  ``(context_id, embedding_profile)``; ``ai.context_embedding`` keeps ``context_id`` as its
  primary key (adopted databases rely on it) and holds the active profile's vectors only.
* ``ai.context_keyword_analysis.embedding_profile`` — the profile whose vector and presets the
  keywords were judged with (NULL for rows judged before this revision), so keywords are
  re-judged after an activation.
* ``ai.context_embedding.embedding`` loses a fixed ``vector(N)`` (an adopted database keeps the
  reference's ``vector(1536)`` when the dimensions agreed): activation copies vectors of
  another dimension into it (SPEC §2.2: no fixed dimension). A type relabel, no rewrite.

Metadata only on existing tables (a nullable column, a relabel); works on both kinds of
database (no ``core.*`` is touched). Downgrade drops what was added (a relaxed dimension stays).
"""

from pinlog.db.migrations.ddl import run_sql

revision = "0009_profiles_side_by_side"
down_revision = "0008_operator_console"

UPGRADE = """
CREATE TABLE IF NOT EXISTS ai.embedding_profile (
    profile            text PRIMARY KEY,
    role               text NOT NULL CHECK (role IN ('active', 'building', 'kept')),
    dimension          integer NULL CHECK (dimension > 0),
    build_after        bigint NOT NULL DEFAULT 0,
    built              bigint NOT NULL DEFAULT 0,
    build_rate         double precision NULL,
    build_started_at   timestamptz NULL,
    build_seen_at      timestamptz NULL,
    build_finished_at  timestamptz NULL,
    activated_at       timestamptz NULL,
    rejudge_after      bigint NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ai.embedding_profile IS
    'embedding profiles side by side (SPEC 9.1): one active, at most one building, kept ones';
CREATE UNIQUE INDEX IF NOT EXISTS embedding_profile_one_per_role
    ON ai.embedding_profile (role) WHERE role IN ('active', 'building');

CREATE TABLE IF NOT EXISTS ai.context_embedding_shadow (
    context_id         bigint NOT NULL,
    embedding_profile  text NOT NULL,
    embedding          vector NOT NULL,
    text_sha256        bytea NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (context_id, embedding_profile)
);
COMMENT ON TABLE ai.context_embedding_shadow IS
    'vectors of the non-active embedding profiles (building, kept for rollback; SPEC 9.1)';

ALTER TABLE ai.context_keyword_analysis ADD COLUMN IF NOT EXISTS embedding_profile text NULL;

DO $$
BEGIN
    IF (SELECT a.atttypmod FROM pg_attribute a
         WHERE a.attrelid = 'ai.context_embedding'::regclass AND a.attname = 'embedding') > 0 THEN
        ALTER TABLE ai.context_embedding ALTER COLUMN embedding TYPE vector;
    END IF;
END $$;
"""

DOWNGRADE = """
ALTER TABLE ai.context_keyword_analysis DROP COLUMN IF EXISTS embedding_profile;
DROP TABLE IF EXISTS ai.context_embedding_shadow;
DROP TABLE IF EXISTS ai.embedding_profile;
"""

upgrade, downgrade = run_sql(UPGRADE, DOWNGRADE)
