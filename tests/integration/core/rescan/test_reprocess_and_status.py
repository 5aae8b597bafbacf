"""Operational reprocessing (SPEC §7.5) and the status picture (SPEC §12), real PostgreSQL."""

from __future__ import annotations

import pytest

from pinlog import metrics
from pinlog.core.reprocess import ReprocessError, count_candidates, reprocess
from pinlog.core.status import refresh_gauges, status_snapshot
from tests.integration.core.rescan.factory import RecordingClient, events, make_context, state
from tests.conftest import config_of

CURRENT = "fake-profile-v2"


def add_embedding(conn, context_id: int, profile: str) -> None:
    member_id, record_id = conn.execute(
        "SELECT member_id, record_id FROM core.context WHERE id = %s", (context_id,)).fetchone()
    conn.execute(
        "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
        "embedding_profile, text_sha256) VALUES (%s, %s, %s, '[1,0,0]', %s, sha256('x'::bytea))",
        (context_id, member_id, record_id, profile))


def add_analysis(conn, context_id: int, preset_version: int) -> None:
    conn.execute("INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                 "model_profile) VALUES (%s, %s, 'similarity-v1')", (context_id, preset_version))


def add_presets(conn, profile: str, versions: dict[int, tuple[int, str, bool]]) -> None:
    """versions: id → (version, visibility, is_active)."""
    for pid, (version, visibility, active) in versions.items():
        conn.execute(
            "INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
            "examples, visibility, is_active, version) VALUES (%s, %s, %s, 'ATMOSPHERE', 'd', "
            "ARRAY['a','b'], %s, %s, %s)", (pid, f"CODE_{pid}", f"name {pid}", visibility, active,
                                            version))
        conn.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                     "embedding) VALUES (%s, %s, '[1,0,0]')", (pid, profile))


@pytest.fixture
def settings_v2(make_rescan_settings):
    return make_rescan_settings(embedding_provider="openai", embedding_profile=CURRENT,
                                embedding_dimension=3)


async def test_reprocess_profile_moves_only_completed_stages_of_another_profile(
        sync_conn, engine, settings_v2):
    old = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED", retry=2, rescanned_age_s=50)
    add_embedding(sync_conn, old, "fake-profile-v1")
    old_kw_failed = make_context(sync_conn, emb="COMPLETED", kw="FAILED")
    add_embedding(sync_conn, old_kw_failed, "fake-profile-v1")
    current = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    add_embedding(sync_conn, current, CURRENT)
    cancelled = make_context(sync_conn, emb="CANCELLED", kw="CANCELLED")
    add_embedding(sync_conn, cancelled, "fake-profile-v1")
    before_current = state(sync_conn, current)

    assert await count_candidates(engine, config_of(settings_v2).core.reprocess, "profile") == 2
    assert state(sync_conn, old)["embedding_status"] == "COMPLETED"  # counting changed nothing

    client = RecordingClient()
    report = await reprocess(engine, config_of(settings_v2).core.reprocess, "profile", client=client, batch_size=1)

    assert sorted(report.moved_ids) == [old, old_kw_failed] and report.batches == 2
    row = state(sync_conn, old)
    assert (row["embedding_status"], row["keyword_status"], row["retry_count"],
            row["rescanned_at"]) == ("PENDING", "PENDING", 0, None)
    row = state(sync_conn, old_kw_failed)
    assert (row["embedding_status"], row["keyword_status"]) == ("PENDING", "FAILED")
    assert state(sync_conn, current) == before_current
    assert state(sync_conn, cancelled)["embedding_status"] == "CANCELLED"
    # old rows are kept until replaced by the new result
    assert sync_conn.execute("SELECT count(*) FROM ai.context_embedding").fetchone()[0] == 4
    assert [e[:4] for e in events(sync_conn, old)] == [
        ("embedding", "COMPLETED", "PENDING", "core"), ("keyword", "COMPLETED", "PENDING", "core")]
    assert sorted(client.ids) == [old, old_kw_failed]
    assert sorted(report.dispatch.dispatched) == [old, old_kw_failed]
    # idempotent: a second run finds nothing
    again = await reprocess(engine, config_of(settings_v2).core.reprocess, "profile", client=client)
    assert again.moved == 0


async def test_reprocess_presets_moves_only_keyword_stages_of_older_versions(
        sync_conn, engine, settings_v2):
    add_presets(sync_conn, CURRENT, {1: (2, "PUBLIC", True), 2: (1, "PUBLIC", True),
                                     3: (9, "BLOCKED", True), 4: (8, "PUBLIC", False)})
    sync_conn.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                      "embedding) VALUES (2, 'other-profile', '[1,0,0]')")
    outdated = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    add_analysis(sync_conn, outdated, 1)
    up_to_date = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    add_analysis(sync_conn, up_to_date, 2)
    no_analysis = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    kw_failed = make_context(sync_conn, emb="COMPLETED", kw="FAILED")
    add_analysis(sync_conn, kw_failed, 1)

    # current version = 2 (BLOCKED v9 and retired v8 do not count)
    assert await count_candidates(engine, config_of(settings_v2).core.reprocess, "presets") == 2
    report = await reprocess(engine, config_of(settings_v2).core.reprocess, "presets", client=None)

    assert report.target == "2" and sorted(report.moved_ids) == [outdated, no_analysis]
    row = state(sync_conn, outdated)
    assert (row["embedding_status"], row["keyword_status"]) == ("COMPLETED", "PENDING")
    assert state(sync_conn, up_to_date)["keyword_status"] == "COMPLETED"
    assert state(sync_conn, kw_failed)["keyword_status"] == "FAILED"
    assert sync_conn.execute("SELECT count(*) FROM ai.context_keyword_analysis").fetchone()[0] == 3
    assert events(sync_conn, outdated) == [
        ("keyword", "COMPLETED", "PENDING", "core", "reprocess --presets: preset version 2")]


async def test_reprocess_presets_without_presets_for_the_profile_is_refused(engine, settings_v2):
    with pytest.raises(ReprocessError, match="pinlog presets load"):
        await count_candidates(engine, config_of(settings_v2).core.reprocess, "presets")


async def test_status_snapshot_and_gauges(sync_conn, engine, make_rescan_settings):
    settings = make_rescan_settings()
    make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    make_context(sync_conn, emb="PENDING", kw="PENDING", retry=1, age_s=120)
    make_context(sync_conn, emb="PROCESSING", kw="PENDING", retry=3, age_s=30)
    make_context(sync_conn, emb="FAILED", kw="PENDING", last_error="embedding permanent: 400")
    make_context(sync_conn, emb="FAILED", kw="FAILED", retry=3,
                 last_error="retries exhausted after 3 attempts; last: x")

    snap = await status_snapshot(engine, config_of(settings).core.status)

    assert snap["rows"]["embedding"] == {"PENDING": 1, "PROCESSING": 1, "COMPLETED": 1,
                                         "FAILED": 2, "CANCELLED": 0}
    assert snap["rows"]["keyword"]["PENDING"] == 3
    assert snap["retry_distribution"] == {0: 1, 1: 1, 3: 1}
    assert snap["exhausted_unfinished"] == 1 and snap["dead_ends"] == 1
    assert snap["unfinished"] == 3
    assert 119 <= snap["oldest_unfinished_seconds"] < 180
    assert [f["last_error"] for f in snap["recent_failures"]] == [  # newest first
        "retries exhausted after 3 attempts; last: x", "embedding permanent: 400"]

    metrics.RETRY_COUNT_ROWS.labels(retry_count="7").set(99)  # a stale label must go
    await refresh_gauges(engine, config_of(settings).core.status)
    assert metrics.STATE_ROWS.labels(stage="embedding", status="FAILED")._value.get() == 2
    assert metrics.STATE_ROWS.labels(stage="keyword", status="CANCELLED")._value.get() == 0
    assert metrics.EXHAUSTED_UNFINISHED._value.get() == 1
    samples = {s.labels["retry_count"]: s.value
               for s in metrics.RETRY_COUNT_ROWS.collect()[0].samples}
    assert samples == {"0": 1, "1": 1, "3": 1}
