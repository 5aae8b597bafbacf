"""Initial schema: core.* and ai.* exactly per SPEC §2.
"""

from alembic import op

revision = "0001"
down_revision = None

STATUSES = "('PENDING','PROCESSING','COMPLETED','FAILED','CANCELLED')"

UPGRADE = f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS core;
CREATE SCHEMA IF NOT EXISTS ai;

-- ===== core (SPEC §2.1) =====================================================================
CREATE TABLE core.member (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_ref text NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    deleted_at   timestamptz NULL
);
-- external_ref is unique among active members.
CREATE UNIQUE INDEX member_external_ref_active_uq
    ON core.member (external_ref) WHERE deleted_at IS NULL AND external_ref IS NOT NULL;

CREATE TABLE core.place (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    external_place_id text NOT NULL UNIQUE,
    name              text NOT NULL,
    address           text NULL,
    road_address      text NULL,
    lat               double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
    lng               double precision NOT NULL CHECK (lng BETWEEN -180 AND 180),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE core.record (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    member_id  bigint NOT NULL REFERENCES core.member (id),
    place_id   bigint NOT NULL REFERENCES core.place (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz NULL
);
-- At most one active record per (member, place).
CREATE UNIQUE INDEX record_member_place_active_uq
    ON core.record (member_id, place_id) WHERE deleted_at IS NULL;
CREATE INDEX record_member_idx ON core.record (member_id) WHERE deleted_at IS NULL;

-- Immutable: body is never updated; an edit is a new context (SPEC §4).
CREATE TABLE core.context (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id  bigint NOT NULL REFERENCES core.record (id),
    member_id  bigint NOT NULL REFERENCES core.member (id),
    body       text NOT NULL CHECK (length(btrim(body)) > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz NULL
);
CREATE INDEX context_record_idx ON core.context (record_id) WHERE deleted_at IS NULL;
CREATE INDEX context_member_idx ON core.context (member_id) WHERE deleted_at IS NULL;

-- ===== ai (SPEC §2.2); no FK into core ===================================================
CREATE TABLE ai.context_ai_state (
    context_id       bigint PRIMARY KEY,
    embedding_status text NOT NULL DEFAULT 'PENDING'
        CONSTRAINT context_ai_state_embedding_status_check CHECK (embedding_status IN {STATUSES}),
    keyword_status   text NOT NULL DEFAULT 'PENDING'
        CONSTRAINT context_ai_state_keyword_status_check CHECK (keyword_status IN {STATUSES}),
    -- The ceiling is the configured max, applied in SQL predicates, not here (SPEC §2.2).
    retry_count      integer NOT NULL DEFAULT 0
        CONSTRAINT context_ai_state_retry_count_check CHECK (retry_count >= 0),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    rescanned_at     timestamptz NULL,
    last_error       text NULL
        CONSTRAINT context_ai_state_last_error_check CHECK (char_length(last_error) <= 500),
    last_error_at    timestamptz NULL
);
-- Rescan claim/finalizer: only unfinished rows, ordered by the age expression (SPEC §2.2, §7).
CREATE INDEX context_ai_state_rescan_idx
    ON ai.context_ai_state ((greatest(updated_at, coalesce(rescanned_at, updated_at))))
    WHERE embedding_status IN ('PENDING','PROCESSING') OR keyword_status IN ('PENDING','PROCESSING');

CREATE TABLE ai.context_embedding (
    context_id        bigint PRIMARY KEY,
    user_id           bigint NOT NULL,
    record_id         bigint NOT NULL,
    embedding         vector NOT NULL,
    embedding_profile text NOT NULL,
    text_sha256       bytea NOT NULL
        CONSTRAINT context_embedding_text_sha256_check CHECK (octet_length(text_sha256) = 32),
    is_deleted        boolean NOT NULL DEFAULT false,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX context_embedding_user_idx ON ai.context_embedding (user_id) WHERE NOT is_deleted;
CREATE INDEX context_embedding_record_idx ON ai.context_embedding (record_id);

CREATE TABLE ai.keyword_preset (
    id           integer PRIMARY KEY,
    code         text NOT NULL UNIQUE,
    display_name text NOT NULL,
    category     text NOT NULL
        CONSTRAINT keyword_preset_category_check
        CHECK (category IN ('COMPANION','ACTIVITY','ATMOSPHERE','SITUATION')),
    description  text NOT NULL,
    examples     text[] NOT NULL,
    visibility   text NOT NULL DEFAULT 'PUBLIC'
        CONSTRAINT keyword_preset_visibility_check
        CHECK (visibility IN ('PUBLIC','PRIVATE_ONLY','BLOCKED')),
    is_active    boolean NOT NULL DEFAULT true,
    version      integer NOT NULL DEFAULT 1
);

CREATE TABLE ai.keyword_preset_embedding (
    preset_id         integer NOT NULL,
    embedding_profile text NOT NULL,
    embedding         vector NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (preset_id, embedding_profile)
);

CREATE TABLE ai.context_keyword (
    context_id     bigint NOT NULL,
    keyword_id     integer NOT NULL REFERENCES ai.keyword_preset (id),
    confidence     numeric(4,3) NULL
        CONSTRAINT context_keyword_confidence_check CHECK (confidence BETWEEN 0 AND 1),
    preset_version integer NOT NULL,
    PRIMARY KEY (context_id, keyword_id)
);
CREATE INDEX context_keyword_keyword_idx ON ai.context_keyword (keyword_id);

CREATE TABLE ai.context_keyword_analysis (
    context_id         bigint PRIMARY KEY,
    preset_version     integer NOT NULL,
    unmatched_concepts jsonb NOT NULL DEFAULT '[]'::jsonb,
    model_profile      text NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Append-only history: one row per status change and per classified error.
CREATE TABLE ai.context_ai_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    context_id  bigint NOT NULL,
    stage       text NOT NULL CONSTRAINT context_ai_event_stage_check
        CHECK (stage IN ('embedding','keyword')),
    from_status text NULL,
    to_status   text NULL,
    actor       text NOT NULL CONSTRAINT context_ai_event_actor_check
        CHECK (actor IN ('core','ai','rescan','finalizer')),
    reason      text NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX context_ai_event_context_idx ON ai.context_ai_event (context_id, id);
"""

# The ai schema itself stays: it holds our version table (ai.alembic_version, pinlog.db.migrate).
DOWNGRADE = """
DROP TABLE IF EXISTS ai.context_ai_event, ai.context_keyword_analysis, ai.context_keyword,
    ai.keyword_preset_embedding, ai.keyword_preset, ai.context_embedding, ai.context_ai_state
    CASCADE;
DROP SCHEMA IF EXISTS core CASCADE;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    from pinlog.db.migrate import owns_core

    if not owns_core(op.get_bind()):
        # An adopted database: core and the ai tables are the backend's (SPEC §2.2).
        raise RuntimeError("refusing to downgrade an adopted database below 0001: "
                           "its core schema and ai tables belong to the backend")
    op.execute(DOWNGRADE)
