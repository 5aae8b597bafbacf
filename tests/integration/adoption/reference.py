"""A database shaped like the reference deployment's (issue 14), built with our own SQL from
the reference's description — never with our migrations:

* ``core.*`` created and migrated by the backend's own tool, with its own version table
  (``public.flyway_schema_history``); its tables differ from ours.
* ``ai.context_ai_state`` without ``rescanned_at`` / error columns, ``varchar(20)`` statuses,
  ``CHECK (retry_count BETWEEN 0 AND 3)``.
* ``ai.context_embedding`` with ``vector(N)`` (1536 in the reference) and no text hash.
* ``ai.keyword_preset`` carrying its vector and profile itself (NOT NULL), free-text categories,
  no ``examples``.
* ``ai.context_keyword`` / ``ai.context_keyword_analysis`` with our columns.
* no ``ai.keyword_preset_embedding``, no ``ai.context_ai_event``.

Rows (context id → state): 1 PENDING/PENDING; 2 PROCESSING/PENDING crashed (retry 1);
3 COMPLETED/COMPLETED with a hash-less embedding and a keyword; 4 CANCELLED/CANCELLED with a
deleted hash-less embedding; 5 COMPLETED/PENDING with a hash-less embedding (its keyword stage
is still to run); 6 COMPLETED/PROCESSING crashed keyword stage (retry 2).

The backend's own statements (:data:`BACKEND_INSERT` …) are what its services run against these
tables; the tests drive the adopted database with exactly these.
"""

from __future__ import annotations

import psycopg

from tests.integration.ai.support import basis, vec_text

#: The reference's production profile (OpenAI text-embedding-3-small, 1536 dimensions).
REF_PROFILE = "openai-text-embedding-3-small-1536"
REF_DIM = 1536

#: Texts of the reference contexts (the backend owns them in core.context_note.content).
TEXTS = {
    1: "친구들이랑 떠들기 좋은 곳",
    2: "조용히 책 읽기 좋은 카페",
    3: "조용히 책 읽기 좋은 카페 두번째",
    4: "삭제된 메모",
    5: "친구들이랑 떠들기 좋은 곳 또",
    6: "조용히 책 읽기 좋은 카페 세번째",
}
#: Controlled vectors per text (basis axes of the test presets: 0 friends, 2 quiet).
AXIS = {1: 0, 2: 2, 3: 2, 4: 7, 5: 0, 6: 2}
USER_ID = 7


def text_vectors(dim: int) -> dict[str, list[float]]:
    """``text → vector`` for the fake provider (dimension ``dim``)."""
    return {TEXTS[c]: basis(AXIS[c], dim) for c in TEXTS}


#: Presets of the reference (id → code, free-text category, axis, visibility).
REF_PRESETS = {
    101: ("WITH_FRIENDS", "COMPANION", 0, "PUBLIC"),
    201: ("WORK_STUDY", "ACTIVITY", 1, "PUBLIC"),
    301: ("QUIET", "ATMOSPHERE", 2, "PUBLIC"),
    501: ("LATE_NIGHT", "TIME_OF_DAY", 5, "PUBLIC"),  # a fifth, free-text category
}


def schema_sql(dim: int) -> str:
    """The reference's DDL (``dim``: its embedding column's fixed dimension)."""
    return f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA core;
CREATE SCHEMA ai;

-- the backend's migration tool and its history (not ours: never touched)
CREATE TABLE public.flyway_schema_history (
    installed_rank integer PRIMARY KEY, version varchar(50), description varchar(200) NOT NULL,
    script varchar(1000) NOT NULL, checksum integer, installed_on timestamp NOT NULL DEFAULT now(),
    success boolean NOT NULL);
INSERT INTO public.flyway_schema_history VALUES
    (1, '1', 'core schema', 'V1__core.sql', 123, now(), true),
    (2, '2', 'ai schema', 'V2__ai.sql', 456, now(), true);

CREATE TABLE core.member (
    id bigserial PRIMARY KEY, email varchar(255) NOT NULL UNIQUE, nickname varchar(50) NOT NULL,
    status varchar(20) NOT NULL DEFAULT 'ACTIVE', created_at timestamp NOT NULL DEFAULT now());
CREATE TABLE core.place (
    id bigserial PRIMARY KEY, kakao_place_id varchar(50) NOT NULL UNIQUE, name varchar(200) NOT NULL,
    lat numeric(10,7) NOT NULL, lng numeric(10,7) NOT NULL);
CREATE TABLE core.record (
    id bigserial PRIMARY KEY, member_id bigint NOT NULL REFERENCES core.member(id),
    place_id bigint NOT NULL REFERENCES core.place(id), is_deleted boolean NOT NULL DEFAULT false,
    created_at timestamp NOT NULL DEFAULT now());
CREATE TABLE core.context_note (
    id bigserial PRIMARY KEY, record_id bigint NOT NULL REFERENCES core.record(id),
    content varchar(2000) NOT NULL, is_deleted boolean NOT NULL DEFAULT false,
    created_at timestamp NOT NULL DEFAULT now());

CREATE TABLE ai.context_ai_state (
    context_id bigint PRIMARY KEY,
    embedding_status varchar(20) NOT NULL DEFAULT 'PENDING',
    keyword_status varchar(20) NOT NULL DEFAULT 'PENDING',
    retry_count int NOT NULL DEFAULT 0 CHECK (retry_count BETWEEN 0 AND 3),
    updated_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE ai.context_embedding (
    context_id bigint PRIMARY KEY, user_id bigint NOT NULL, record_id bigint NOT NULL,
    embedding vector({dim}) NOT NULL, embedding_profile varchar(100) NOT NULL,
    is_deleted boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX idx_context_embedding_user ON ai.context_embedding (user_id);

CREATE TABLE ai.keyword_preset (
    id int PRIMARY KEY, code varchar(50) NOT NULL UNIQUE, display_name varchar(100) NOT NULL,
    category varchar(30) NOT NULL, description text NOT NULL,
    visibility varchar(20) NOT NULL DEFAULT 'PUBLIC', is_active boolean NOT NULL DEFAULT true,
    version int NOT NULL DEFAULT 1,
    embedding vector({dim}) NOT NULL, embedding_profile varchar(100) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE ai.context_keyword (
    context_id bigint NOT NULL, keyword_id int NOT NULL REFERENCES ai.keyword_preset(id),
    confidence numeric(4,3) NULL CHECK (confidence BETWEEN 0 AND 1),
    preset_version int NOT NULL, PRIMARY KEY (context_id, keyword_id));

CREATE TABLE ai.context_keyword_analysis (
    context_id bigint PRIMARY KEY, preset_version int NOT NULL,
    unmatched_concepts jsonb NOT NULL DEFAULT '[]'::jsonb, model_profile text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now());
"""


def build_reference_database(conn: psycopg.Connection, *, dim: int = REF_DIM,
                             profile: str = REF_PROFILE) -> None:
    """Create the reference schema and its rows on ``conn`` (autocommit)."""
    conn.execute(schema_sql(dim))
    conn.execute("INSERT INTO core.member (email, nickname) VALUES ('a@example.com', 'a')")
    conn.execute("INSERT INTO core.place (kakao_place_id, name, lat, lng) "
                 "VALUES ('k1', '카페', 37.5, 127.0)")
    for record_id in range(1, 7):
        conn.execute("INSERT INTO core.record (member_id, place_id) VALUES (1, 1)"
                     if record_id == 1 else
                     "INSERT INTO core.record (member_id, place_id, is_deleted) VALUES (1, 1, true)")
    for cid, body in TEXTS.items():
        conn.execute("INSERT INTO core.context_note (record_id, content, is_deleted) "
                     "VALUES (%s, %s, %s)", (cid, body, cid == 4))
    for pid, (code, category, axis, visibility) in REF_PRESETS.items():
        conn.execute(
            "INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
            "visibility, embedding, embedding_profile) VALUES (%s, %s, %s, %s, %s, %s, %s::vector, %s)",
            (pid, code, code.title(), category, f"{code} description", visibility,
             vec_text(basis(axis, dim)), profile))
    states = {1: ("PENDING", "PENDING", 0, 0), 2: ("PROCESSING", "PENDING", 1, 30),
              3: ("COMPLETED", "COMPLETED", 0, 3600), 4: ("CANCELLED", "CANCELLED", 0, 3600),
              5: ("COMPLETED", "PENDING", 0, 60), 6: ("COMPLETED", "PROCESSING", 2, 30)}
    for cid, (emb, kw, retry, age) in states.items():
        conn.execute("INSERT INTO ai.context_ai_state VALUES (%s, %s, %s, %s, "
                     "now() - make_interval(secs => %s))", (cid, emb, kw, retry, age))
    for cid in (3, 4, 5, 6):
        conn.execute(
            "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
            "embedding_profile, is_deleted) VALUES (%s, %s, %s, %s::vector, %s, %s)",
            (cid, USER_ID, cid, vec_text(basis(AXIS[cid], dim)), profile, cid == 4))
    conn.execute("INSERT INTO ai.context_keyword VALUES (3, 301, 0.9, 1)")
    conn.execute("INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                 "model_profile) VALUES (3, 1, 'gpt-4o-mini')")


# --- the backend's own statements (what its services run; issue 14) -----------------------------

#: A new context: the state row is created PENDING/PENDING, retry 0.
BACKEND_INSERT = ("INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, "
                  "retry_count, updated_at) VALUES (%s, 'PENDING', 'PENDING', 0, now())")
#: Delete/edit: both stages CANCELLED, the embedding marked deleted.
BACKEND_CANCEL = ("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                  "keyword_status = 'CANCELLED', updated_at = now() WHERE context_id = %s")
BACKEND_CANCEL_EMBEDDING = "UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = %s"
#: Its rescan claim: retry_count + 1 AND updated_at refreshed (the hazard of SPEC §7.3).
BACKEND_CLAIM = ("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, updated_at = now() "
                 "WHERE context_id = %s AND retry_count < 3 "
                 "AND (embedding_status IN ('PENDING','PROCESSING') "
                 "     OR keyword_status IN ('PENDING','PROCESSING')) RETURNING retry_count")
#: Its finalizer: retries exhausted → FAILED.
BACKEND_FINALIZE = ("UPDATE ai.context_ai_state SET "
                    "embedding_status = CASE WHEN embedding_status IN ('PENDING','PROCESSING') "
                    "  THEN 'FAILED' ELSE embedding_status END, "
                    "keyword_status = CASE WHEN keyword_status IN ('PENDING','PROCESSING') "
                    "  THEN 'FAILED' ELSE keyword_status END, updated_at = now() "
                    "WHERE context_id = %s AND retry_count >= 3")


def backend_snapshot(conn: psycopg.Connection) -> dict[str, object]:
    """Everything of the backend's: every column of every table outside ``ai`` (with types,
    nullability and defaults), their rows, constraints and indexes, and its version table."""
    columns = conn.execute(
        """SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                  a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE n.nspname NOT IN ('ai', 'pg_catalog', 'information_schema', 'pg_toast')
              AND c.relkind IN ('r', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY 1, 2, 3""").fetchall()
    constraints = conn.execute(
        """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
            WHERE connamespace NOT IN ('ai'::regnamespace, 'pg_catalog'::regnamespace)
            ORDER BY 1, 2""").fetchall()
    indexes = conn.execute("SELECT schemaname, indexname, indexdef FROM pg_indexes "
                           "WHERE schemaname NOT IN ('ai', 'pg_catalog') ORDER BY 1, 2").fetchall()
    rows = {}
    for table in ("core.member", "core.place", "core.record", "core.context_note",
                  "public.flyway_schema_history"):
        rows[table] = conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    return {"columns": columns, "constraints": constraints, "indexes": indexes, "rows": rows}
