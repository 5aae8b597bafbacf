"""Migrations create exactly the SPEC §2 schema; re-running is a no-op; downgrade/upgrade works."""

from __future__ import annotations

import psycopg
import pytest

from pinlog.db import migrate
from tests.conftest import create_database

TS, TS_NULL = ("timestamp with time zone", False), ("timestamp with time zone", True)

EXPECTED_COLUMNS: dict[str, dict[str, tuple[str, bool]]] = {
    # table -> column -> (type, nullable)
    "core.member": {"id": ("bigint", False), "external_ref": ("text", True),
                    "created_at": TS,
                    "deleted_at": TS_NULL},
    "core.place": {"id": ("bigint", False), "external_place_id": ("text", False),
                   "name": ("text", False), "address": ("text", True), "road_address": ("text", True),
                   "lat": ("double precision", False), "lng": ("double precision", False),
                   "created_at": TS,
                   "lexemes": ("tsvector", True)},
    "core.record": {"id": ("bigint", False), "member_id": ("bigint", False),
                    "place_id": ("bigint", False), "created_at": TS,
                    "updated_at": TS,
                    "deleted_at": TS_NULL,
                    "place_lexemes": ("tsvector", True)},
    "core.context": {"id": ("bigint", False), "record_id": ("bigint", False),
                     "member_id": ("bigint", False), "body": ("text", False),
                     "created_at": TS,
                     "deleted_at": TS_NULL,
                     "lexemes": ("tsvector", True)},
    "ai.context_ai_state": {"context_id": ("bigint", False), "embedding_status": ("text", False),
                            "keyword_status": ("text", False), "retry_count": ("integer", False),
                            "updated_at": TS,
                            "rescanned_at": TS_NULL,
                            "last_error": ("text", True),
                            "last_error_at": TS_NULL,
                            # SPEC §7.3 re-claim after the backend's rescan (0005_stage_start_retry)
                            "embedding_start_retry": ("integer", True),
                            "keyword_start_retry": ("integer", True),
                            # SPEC §7.3.1 re-claim by owner (0010_claim_owner)
                            "owner": ("text", True),
                            "owned_at": TS_NULL},
    "ai.context_embedding": {"context_id": ("bigint", False), "user_id": ("bigint", False),
                             "record_id": ("bigint", False), "embedding": ("vector", False),
                             "embedding_profile": ("text", False), "text_sha256": ("bytea", False),
                             "is_deleted": ("boolean", False),
                             "updated_at": TS},
    "ai.keyword_preset": {"id": ("integer", False), "code": ("text", False),
                          "display_name": ("text", False), "category": ("text", False),
                          "description": ("text", False), "examples": ("text[]", False),
                          "visibility": ("text", False), "is_active": ("boolean", False),
                          "version": ("integer", False),
                          "cues": ("text[]", False)},  # 0004_preset_cues_and_evidence: SPEC §8
    "ai.keyword_preset_embedding": {"preset_id": ("integer", False),
                                    "embedding_profile": ("text", False),
                                    "embedding": ("vector", False),
                                    "updated_at": TS},
    "ai.context_keyword": {"context_id": ("bigint", False), "keyword_id": ("integer", False),
                           "confidence": ("numeric(4,3)", True), "preset_version": ("integer", False)},
    "ai.context_keyword_analysis": {"context_id": ("bigint", False), "preset_version": ("integer", False),
                                    "unmatched_concepts": ("jsonb", False),
                                    "model_profile": ("text", False),
                                    "evidence": ("jsonb", False),  # 0004_preset_cues_and_evidence
                                    "updated_at": TS,
                                    # SPEC §9.1: the profile the keywords were judged with
                                    # (0009_profiles_side_by_side)
                                    "embedding_profile": ("text", True)},
    "ai.context_ai_event": {"id": ("bigint", False), "context_id": ("bigint", False),
                            "stage": ("text", False), "from_status": ("text", True),
                            "to_status": ("text", True), "actor": ("text", False),
                            "reason": ("text", True), "at": TS},
    # issue 28 (0011_ai_lexical_terms): the ai side's own lexical evidence, one row per context
    "ai.context_lexical": {"context_id": ("bigint", False), "user_id": ("bigint", False),
                           "record_id": ("bigint", False), "note_terms": ("tsvector", False),
                           "place_terms": ("tsvector", False), "updated_at": TS},
    # issue 16 #7 (0003_process_settings): rule-relevant settings of each live process
    "ai.process_settings": {"process_id": ("text", False), "host": ("text", False),
                            "pid": ("integer", False), "components": ("text", False),
                            "settings": ("jsonb", False),
                            "started_at": TS,
                            "seen_at": TS,
                            "version": ("text", True),  # 0008_operator_console
                            "alive_until": TS_NULL},  # 0010_claim_owner: heartbeat lease
    # 0008_operator_console: the maintained state counts and the console's action log
    "ai.state_count": {"stage": ("text", False), "status": ("text", False),
                       "n": ("bigint", False)},
    "ai.state_count_delta": {"stage": ("text", False), "status": ("text", False),
                             "n": ("bigint", False)},
    "core.console_action": {"id": ("bigint", False), "at": TS, "role": ("text", False),
                            "action": ("text", False), "params": ("jsonb", False),
                            "outcome": ("jsonb", False), "request_id": ("text", True)},
    # SPEC §9.1 (0009_profiles_side_by_side): profiles side by side — roles, build progress
    "ai.embedding_profile": {"profile": ("text", False), "role": ("text", False),
                             "dimension": ("integer", True), "build_after": ("bigint", False),
                             "built": ("bigint", False),
                             "build_rate": ("double precision", True),
                             "build_started_at": TS_NULL, "build_seen_at": TS_NULL,
                             "build_finished_at": TS_NULL, "activated_at": TS_NULL,
                             "rejudge_after": ("bigint", True), "updated_at": TS},
    # ... and the vectors of every profile but the active one, keyed (context, profile)
    "ai.context_embedding_shadow": {"context_id": ("bigint", False),
                                    "embedding_profile": ("text", False),
                                    "embedding": ("vector", False),
                                    "text_sha256": ("bytea", True), "updated_at": TS},
}


def _columns(conn: psycopg.Connection) -> dict[str, dict[str, tuple[str, bool]]]:
    rows = conn.execute(
        """SELECT n.nspname || '.' || c.relname, a.attname,
                  format_type(a.atttypid, a.atttypmod), NOT a.attnotnull
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname IN ('core', 'ai') AND c.relkind = 'r' AND a.attnum > 0
             AND NOT a.attisdropped AND c.relname <> 'alembic_version'"""
    ).fetchall()
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, typ, nullable in rows:
        out.setdefault(table, {})[column] = (typ, nullable)
    return out


def _defs(conn: psycopg.Connection, sql: str) -> list[str]:
    return [r[0] for r in conn.execute(sql).fetchall()]


def test_migrate_creates_exactly_the_spec_schema(sync_conn):
    assert _columns(sync_conn) == EXPECTED_COLUMNS

    checks = " ".join(_defs(sync_conn, """SELECT pg_get_constraintdef(oid) FROM pg_constraint
        WHERE contype = 'c' AND connamespace IN ('core'::regnamespace, 'ai'::regnamespace)"""))
    for fragment in ("btrim(body)", "retry_count >= 0", "'PENDING'::text", "'CANCELLED'::text",
                     "'PRIVATE_ONLY'::text", "confidence >= (0)::numeric",
                     "'finalizer'::text"):
        assert fragment in checks, fragment
    # preset categories are not limited to the reference's four (SPEC §8; 0006_any_preset_category)
    assert "'SITUATION'::text" not in checks
    assert "retry_count <=" not in checks  # the ceiling lives in SQL predicates (SPEC §2.2)

    fks = _defs(sync_conn, """SELECT conrelid::regclass || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE contype = 'f' AND connamespace = 'ai'::regnamespace""")
    assert fks == ["ai.context_keyword FOREIGN KEY (keyword_id) REFERENCES ai.keyword_preset(id)"]

    indexes = {name: d for name, d in sync_conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname IN ('core','ai')").fetchall()}
    rescan = indexes["context_ai_state_rescan_idx"]
    assert "GREATEST(updated_at, COALESCE(rescanned_at, updated_at))" in rescan
    assert "WHERE ((embedding_status = ANY" in rescan and "keyword_status = ANY" in rescan
    # SPEC §7.3.1: the rescan finds the rows of gone owners by owner, among unfinished rows only
    owner = indexes["context_ai_state_owner_idx"]
    assert "(owner)" in owner and owner.split("WHERE", 1)[1] == rescan.split("WHERE", 1)[1]
    assert "WHERE (NOT is_deleted)" in indexes["context_embedding_user_idx"]
    assert "(record_id)" in indexes["context_embedding_record_idx"]
    assert "(keyword_id)" in indexes["context_keyword_keyword_idx"]
    assert "(user_id)" in indexes["context_lexical_user_idx"]  # the lexical statement's member index
    assert "WHERE (deleted_at IS NULL)" in indexes["record_member_place_active_uq"]
    assert "UNIQUE" in indexes["record_member_place_active_uq"]
    assert "UNIQUE" in indexes["member_external_ref_active_uq"]
    # 0007_retention_indexes (issue 31): what the purge reads, oldest first, and the foreign keys
    cancelled = indexes["context_ai_state_cancelled_idx"]
    assert "(updated_at, context_id)" in cancelled
    assert "embedding_status = 'CANCELLED'" in cancelled and "keyword_status = 'CANCELLED'" in cancelled
    assert "(at, id)" in indexes["context_ai_event_at_idx"]
    for name in ("context_deleted_idx", "record_deleted_idx", "member_deleted_idx"):
        assert "(deleted_at, id) WHERE (deleted_at IS NOT NULL)" in indexes[name], name
    for name, column in (("context_record_all_idx", "record_id"),
                         ("context_member_all_idx", "member_id"),
                         ("record_member_all_idx", "member_id")):
        assert indexes[name].endswith(f"({column})"), name
    pks = dict(sync_conn.execute("""SELECT conrelid::regclass::text, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE contype = 'p' AND connamespace = 'ai'::regnamespace""").fetchall())
    assert pks["ai.context_embedding"] == "PRIMARY KEY (context_id)"
    assert pks["ai.keyword_preset_embedding"] == "PRIMARY KEY (preset_id, embedding_profile)"
    assert pks["ai.context_keyword"] == "PRIMARY KEY (context_id, keyword_id)"
    assert pks["ai.context_embedding_shadow"] == "PRIMARY KEY (context_id, embedding_profile)"
    # SPEC §9.1: one active and at most one building profile
    assert "UNIQUE" in indexes["embedding_profile_one_per_role"]
    assert "'active'::text" in indexes["embedding_profile_one_per_role"]
    assert not any("embedding" in d and ("hnsw" in d or "ivfflat" in d) for d in indexes.values())
    # 0012_member_terms_index (issue 28): core's lexical statement reads each term keyed by its
    # member, active rows only
    assert indexes["context_member_terms_idx"].endswith(
        "USING gin (core.member_terms(member_id, lexemes)) WHERE (deleted_at IS NULL)")
    assert indexes["record_member_terms_idx"].endswith(
        "USING gin (core.member_terms(member_id, place_lexemes)) WHERE (deleted_at IS NULL)")
    assert sync_conn.execute("SELECT core.member_terms(7, array_to_tsvector('{카페,quiet}'))"
                             ).fetchone()[0] == ["7 quiet", "7 카페"]


def test_state_row_defaults(sync_conn):
    sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) VALUES (1)")
    row = sync_conn.execute("SELECT embedding_status, keyword_status, retry_count, rescanned_at, "
                            "last_error FROM ai.context_ai_state").fetchone()
    assert row == ("PENDING", "PENDING", 0, None, None)
    with pytest.raises(psycopg.errors.CheckViolation):
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'DONE'")
    with pytest.raises(psycopg.errors.CheckViolation):
        sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = -1")


def test_migrate_twice_is_a_noop_and_downgrade_then_upgrade_works(pg_server_url):
    url = create_database(pg_server_url, "pinlog_mig")
    assert migrate.current_revision(url) is None
    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.HEAD
    with psycopg.connect(url) as conn:
        before = _columns(conn)
    migrate.upgrade(url)  # no-op
    assert migrate.current_revision(url) == migrate.HEAD
    migrate.downgrade(url)
    with psycopg.connect(url) as conn:
        assert _columns(conn) == {}
    migrate.upgrade(url)
    with psycopg.connect(url) as conn:
        assert _columns(conn) == before == EXPECTED_COLUMNS


def test_lexical_revision_backfills_existing_notes_places_and_records(pg_server_url):
    """Issue 10: rows written before the lexical revision (file 0002_lexical_terms) get their
    lexical terms in the migration (pinlog.text.lexical_terms), records a copy of their place's
    terms; downgrade removes the columns again."""
    from pinlog.text import lexical_terms

    url = create_database(pg_server_url, "pinlog_lex")
    migrate.upgrade(url, "0001")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO core.member DEFAULT VALUES")
        conn.execute("INSERT INTO core.place (external_place_id, name, address, lat, lng) "
                     "VALUES ('p1', '피넛커피 충북혁신도시점', 'Seoul Station', 37.5, 127.0)")
        conn.execute("INSERT INTO core.record (member_id, place_id) VALUES (1, 1)")
        conn.execute("INSERT INTO core.context (record_id, member_id, body) "
                     "VALUES (1, 1, '소파가 아주 편했다'), (1, 1, 'Great espresso')")
    migrate.upgrade(url)
    with psycopg.connect(url) as conn:
        notes = dict(conn.execute("SELECT body, tsvector_to_array(lexemes) FROM core.context"))
        place = conn.execute("SELECT tsvector_to_array(lexemes) FROM core.place").fetchone()[0]
        record = conn.execute("SELECT tsvector_to_array(place_lexemes) FROM core.record"
                              ).fetchone()[0]
    assert {k: sorted(v) for k, v in notes.items()} == {
        "소파가 아주 편했다": sorted(lexical_terms("소파가 아주 편했다")),
        "Great espresso": ["espresso", "great"]}
    assert sorted(place) == sorted(lexical_terms("피넛커피 충북혁신도시점 Seoul Station"))
    assert "피넛" in place and "station" in place
    assert sorted(record) == sorted(place)
    migrate.downgrade(url, "0001")
    with psycopg.connect(url) as conn:
        assert "lexemes" not in _columns(conn)["core.context"]
        assert "place_lexemes" not in _columns(conn)["core.record"]


def test_our_version_table_lives_in_ai_never_in_public(pg_server_url):
    """SPEC §2.2: our history is ai.alembic_version (fresh path too); public stays clean."""
    url = create_database(pg_server_url, "pinlog_ver")
    migrate.upgrade(url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None
        assert conn.execute("SELECT version_num FROM ai.alembic_version").fetchall() == \
            [(migrate.head(),)]
    migrate.downgrade(url)
    assert migrate.current_revision(url) is None
