"""Loading presets into ai.keyword_preset(_embedding) and taking snapshots, on a real
PostgreSQL (SPEC §2.2, §8, §11 #15)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.ports import Preset
from pinlog.ai.presets import PresetFileError, load_preset_file, load_snapshot, upsert_presets
from tests.fakes import FakeEmbeddingProvider


def _preset(pid: int, code: str, category: str = "ATMOSPHERE", **kw) -> Preset:
    values = dict(display_name=f"name {code}", description=f"description of {code}",
                  examples=(f"{code} example one", f"{code} example two"))
    values.update(kw)
    return Preset(id=pid, code=code, category=category, **values)


PRESETS = [
    _preset(101, "WITH_FRIENDS", "COMPANION"),
    _preset(301, "QUIET"),
    _preset(302, "COZY"),
    _preset(404, "RAINY_DAY", "SITUATION", visibility="PRIVATE_ONLY"),
]


def _rows(sync_conn, sql: str) -> list[tuple]:
    return sync_conn.execute(sql).fetchall()


async def test_first_load_inserts_and_embeds_every_preset_as_passages(engine, sync_conn):
    provider = FakeEmbeddingProvider()
    report = await upsert_presets(engine, PRESETS, provider)
    assert report.inserted == [101, 301, 302, 404]
    assert report.embedded == [101, 301, 302, 404]
    assert report.updated == report.retired == report.unchanged == []
    assert provider.calls == 1 and provider.kinds == ["passage"]
    rows = _rows(sync_conn, "SELECT id, code, visibility, is_active, examples FROM "
                            "ai.keyword_preset ORDER BY id")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (101, "WITH_FRIENDS", "PUBLIC", True), (301, "QUIET", "PUBLIC", True),
        (302, "COZY", "PUBLIC", True), (404, "RAINY_DAY", "PRIVATE_ONLY", True)]
    assert rows[0][4] == ["WITH_FRIENDS example one", "WITH_FRIENDS example two"]
    emb = _rows(sync_conn, "SELECT preset_id, embedding_profile, vector_dims(embedding) "
                           "FROM ai.keyword_preset_embedding ORDER BY preset_id")
    assert emb == [(i, "fake-profile-v1", 8) for i in (101, 301, 302, 404)]


async def test_second_load_of_the_same_list_changes_nothing_and_calls_no_model(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    before = _rows(sync_conn, "SELECT preset_id, updated_at, xmin::text FROM "
                              "ai.keyword_preset_embedding ORDER BY 1")
    preset_xmin = _rows(sync_conn, "SELECT id, xmin::text FROM ai.keyword_preset ORDER BY 1")
    provider = FakeEmbeddingProvider()
    report = await upsert_presets(engine, PRESETS, provider)
    assert not report.changed
    assert report.unchanged == [101, 301, 302, 404]
    assert provider.calls == 0
    assert _rows(sync_conn, "SELECT preset_id, updated_at, xmin::text FROM "
                            "ai.keyword_preset_embedding ORDER BY 1") == before
    assert _rows(sync_conn, "SELECT id, xmin::text FROM ai.keyword_preset ORDER BY 1") == preset_xmin


async def test_changed_text_is_updated_and_re_embedded_and_drops_other_profiles(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider(profile="other-profile"))
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    changed = [replace(p, description="a new range") if p.id == 301 else p for p in PRESETS]
    provider = FakeEmbeddingProvider()
    report = await upsert_presets(engine, changed, provider)
    assert report.updated == [301] and report.embedded == [301]
    assert provider.texts and all("a new range" in t or "QUIET" in t for t in provider.texts)
    emb = _rows(sync_conn, "SELECT preset_id, embedding_profile FROM ai.keyword_preset_embedding "
                           "WHERE preset_id = 301 ORDER BY 2")
    assert emb == [(301, "fake-profile-v1")]  # the stale other-profile vector is gone
    # the other profile re-embeds 301 on its next load (and only 301)
    other = FakeEmbeddingProvider(profile="other-profile")
    report = await upsert_presets(engine, changed, other)
    assert report.embedded == [301] and report.unchanged == [101, 301, 302, 404]


async def test_version_or_visibility_change_updates_without_re_embedding(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    changed = [replace(p, version=2, visibility="BLOCKED") if p.id == 302 else p for p in PRESETS]
    provider = FakeEmbeddingProvider()
    report = await upsert_presets(engine, changed, provider)
    assert report.updated == [302] and report.embedded == [] and provider.calls == 0
    assert _rows(sync_conn, "SELECT visibility, version FROM ai.keyword_preset WHERE id = 302") \
        == [("BLOCKED", 2)]


async def test_code_of_an_existing_id_is_immutable(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    renamed = [replace(p, code="SILENT") if p.id == 301 else p for p in PRESETS]
    provider = FakeEmbeddingProvider()
    with pytest.raises(PresetFileError, match="preset id 301: code is immutable"):
        await upsert_presets(engine, renamed, provider)
    assert provider.calls == 0
    assert _rows(sync_conn, "SELECT code FROM ai.keyword_preset WHERE id = 301") == [("QUIET",)]


async def test_code_owned_by_another_id_is_refused(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    moved = [*PRESETS, _preset(399, "QUIET")]
    moved = [p for p in moved if p.id != 301]
    with pytest.raises(PresetFileError, match="code QUIET already belongs to preset id 301"):
        await upsert_presets(engine, moved, FakeEmbeddingProvider())
    assert _rows(sync_conn, "SELECT count(*) FROM ai.keyword_preset") == [(4,)]


async def test_absent_presets_are_retired_never_deleted_and_come_back(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    report = await upsert_presets(engine, PRESETS[:2], FakeEmbeddingProvider())
    assert report.retired == [302, 404]
    assert _rows(sync_conn, "SELECT id, is_active FROM ai.keyword_preset ORDER BY id") == [
        (101, True), (301, True), (302, False), (404, False)]
    # keep_missing leaves them alone
    report = await upsert_presets(engine, PRESETS[:1], FakeEmbeddingProvider(),
                                  retire_missing=False)
    assert report.retired == [] and not report.changed
    # present again → re-activated, no re-embedding (text and profile unchanged)
    provider = FakeEmbeddingProvider()
    report = await upsert_presets(engine, PRESETS, provider)
    assert report.updated == [302, 404] and provider.calls == 0
    assert _rows(sync_conn, "SELECT count(*) FROM ai.keyword_preset WHERE is_active") == [(4,)]


async def test_wrong_vector_length_is_permanent_and_writes_nothing(engine, sync_conn):
    with pytest.raises(PermanentModelError, match="shape"):
        await upsert_presets(engine, PRESETS, FakeEmbeddingProvider(wrong_dimension=5))
    assert _rows(sync_conn, "SELECT count(*) FROM ai.keyword_preset") == [(0,)]
    assert _rows(sync_conn, "SELECT count(*) FROM ai.keyword_preset_embedding") == [(0,)]


async def test_provider_failure_writes_nothing(engine, sync_conn):
    provider = FakeEmbeddingProvider()
    provider.fail_next(TransientModelError)
    with pytest.raises(TransientModelError):
        await upsert_presets(engine, PRESETS, provider)
    assert _rows(sync_conn, "SELECT count(*) FROM ai.keyword_preset") == [(0,)]


async def test_snapshot_has_active_presets_of_the_profile_with_normalised_rows(engine, sync_conn):
    await upsert_presets(engine, PRESETS, FakeEmbeddingProvider())
    await upsert_presets(engine, [replace(PRESETS[0], version=3)], FakeEmbeddingProvider(),
                         retire_missing=False)
    # 302 retired (inactive); 404 only embedded for another profile
    sync_conn.execute("UPDATE ai.keyword_preset SET is_active = false WHERE id = 302")
    sync_conn.execute("DELETE FROM ai.keyword_preset_embedding WHERE preset_id = 404")
    async with engine.connect() as conn:
        snap = await load_snapshot(conn, "fake-profile-v1")
        other = await load_snapshot(conn, "never-loaded-profile")
    assert [p.id for p in snap.presets] == [101, 301]
    assert snap.profile == "fake-profile-v1" and snap.version == 3
    assert snap.matrix.shape == (2, 8) and snap.matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(snap.matrix, axis=1), 1.0, atol=1e-5)
    assert snap.presets[0].examples == PRESETS[0].examples
    assert len(other) == 0 and other.matrix.shape == (0, 0) and other.version == 0


async def test_a_fifth_category_is_stored_and_becomes_a_candidate(engine, sync_conn):
    """SPEC §8: a preset file may define categories beyond the four; the database takes them
    (migration 0006_any_preset_category dropped the four-name CHECK) and they are candidates
    like any other."""
    food = _preset(501, "DUMPLINGS", "FOOD")
    provider = FakeEmbeddingProvider()
    await upsert_presets(engine, [*PRESETS, food], provider)
    assert _rows(sync_conn, "SELECT category FROM ai.keyword_preset WHERE id = 501") == [("FOOD",)]
    async with engine.connect() as conn:
        snapshot = await load_snapshot(conn, provider.profile)
    # a context vector equal to the FOOD preset's stored vector: its nearest candidate
    vector = snapshot.matrix[[p.id for p in snapshot.presets].index(501)]
    candidates = select_candidates(vector, snapshot, top_k=1, floor=-1.0)
    assert [(c.preset.id, c.preset.category) for c in candidates] == [(501, "FOOD")]


async def test_scenario_15_blocked_preset_never_becomes_a_candidate(engine, sync_conn):
    """SPEC §11 #15: a BLOCKED preset is never a candidate, even when it is the nearest."""
    blocked = _preset(303, "TRENDY", visibility="BLOCKED")
    provider = FakeEmbeddingProvider()
    await upsert_presets(engine, [*PRESETS, blocked], provider)
    # a context vector identical to the BLOCKED preset's own vector
    vector = np.asarray(provider.vector_for(blocked.embedding_text()))
    async with engine.connect() as conn:
        snapshot = await load_snapshot(conn, provider.profile)
    assert 303 not in [p.id for p in snapshot.presets]
    candidates = select_candidates(vector, snapshot, top_k=100, floor=-1.0)
    assert len(candidates) == 4 and 303 not in [c.preset.id for c in candidates]
    # and it stays out when a loaded file turns a candidate into BLOCKED
    await upsert_presets(engine, [replace(p, visibility="BLOCKED") if p.id == 301 else p
                                  for p in [*PRESETS, blocked]], provider)
    async with engine.connect() as conn:
        snapshot = await load_snapshot(conn, provider.profile)
    assert [p.id for p in snapshot.presets] == [101, 302, 404]


async def test_the_packaged_default_file_loads_and_reloads_idempotently(engine, sync_conn):
    presets = load_preset_file()
    provider = FakeEmbeddingProvider(dimension=16)
    first = await upsert_presets(engine, presets, provider)
    second = await upsert_presets(engine, presets, provider)
    assert len(first.inserted) == len(presets) >= 25
    assert not second.changed and provider.calls == 1
    async with engine.connect() as conn:
        snap = await load_snapshot(conn, provider.profile)
    assert len(snap) == len([p for p in presets if p.visibility != "BLOCKED"])
