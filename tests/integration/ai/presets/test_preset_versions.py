"""A preset's version follows its content (SPEC §8, §7.5): loading changed content raises the
version by itself, so ``reprocess --presets`` finds the contexts judged with the old content.
Real PostgreSQL; the fake embedding provider."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pinlog.ai.ports import Preset
from pinlog.ai.presets import load_preset_file, load_snapshot, upsert_presets
from pinlog.core.reprocess import count_candidates
from tests.conftest import make_settings, config_of
from tests.fakes import FakeEmbeddingProvider
from tests.integration.core.rescan.factory import make_context


def _preset(pid: int, code: str, **kw) -> Preset:
    values = dict(display_name=f"name {code}", category="ATMOSPHERE",
                  description=f"description of {code}", examples=("one", "two"), cues=("큐",))
    values.update(kw)
    return Preset(id=pid, code=code, **values)


BASE = [_preset(301, "QUIET"), _preset(302, "COZY"), _preset(303, "TRENDY")]


def _versions(sync_conn) -> dict[int, int]:
    return dict(sync_conn.execute("SELECT id, version FROM ai.keyword_preset").fetchall())


@pytest.mark.parametrize("change", [
    {"display_name": "새 이름"}, {"description": "new range"}, {"examples": ("one", "three")},
    {"cues": ("큐", "단서")}, {"visibility": "PRIVATE_ONLY"}, {"category": "SITUATION"},
])
async def test_a_content_change_raises_the_version_without_editing_version(engine, sync_conn,
                                                                             change):
    provider = FakeEmbeddingProvider()
    first = await upsert_presets(engine, BASE, provider)
    assert first.version == 1 and _versions(sync_conn) == {301: 1, 302: 1, 303: 1}
    changed = [replace(BASE[0], **change), *BASE[1:]]
    report = await upsert_presets(engine, changed, provider)
    assert report.updated == [301] and report.version == 2
    assert _versions(sync_conn) == {301: 2, 302: 1, 303: 1}
    # loading the same content again changes nothing and keeps the version
    again = await upsert_presets(engine, changed, provider)
    assert not again.changed and again.version == 2
    async with engine.connect() as conn:
        assert (await load_snapshot(conn, provider.profile)).version == 2


async def test_versions_never_go_down_and_every_change_is_a_new_list_revision(engine, sync_conn):
    provider = FakeEmbeddingProvider()
    await upsert_presets(engine, BASE, provider)
    await upsert_presets(engine, [replace(BASE[0], description="x"), *BASE[1:]], provider)
    # another preset changes: it goes above the list's current top (2), not to its own 1 + 1
    await upsert_presets(engine, [replace(BASE[0], description="x"),
                                  replace(BASE[1], cues=()), BASE[2]], provider)
    assert _versions(sync_conn) == {301: 2, 302: 3, 303: 1}
    # a file saying version 1 for unchanged presets does not lower a stored version
    report = await upsert_presets(engine, [replace(BASE[0], description="x", version=1),
                                           replace(BASE[1], cues=(), version=1), BASE[2]],
                                  provider)
    assert not report.changed and _versions(sync_conn)[302] == 3
    # a new preset and a retired one coming back are new revisions too
    await upsert_presets(engine, [BASE[0]], provider)  # changed back + retires 302, 303
    assert _versions(sync_conn)[301] == 4
    await upsert_presets(engine, [BASE[0], BASE[1], _preset(304, "LIVELY")], provider)
    versions = _versions(sync_conn)
    assert versions[302] == versions[304] == 5 and versions[301] == 4 and versions[303] == 1


async def test_reprocess_presets_finds_contexts_judged_before_another_file_was_loaded(
        engine, sync_conn, tmp_path, db_url):
    provider = FakeEmbeddingProvider()
    settings = make_settings(tmp_path, db_url, embedding_provider="openai",
                             embedding_profile=provider.profile,
                             embedding_dimension=provider.dimension)
    await upsert_presets(engine, load_preset_file(), provider)
    context_id = make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")
    sync_conn.execute("INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                      "model_profile) VALUES (%s, 1, 'similarity-v4')", (context_id,))
    assert await count_candidates(engine, config_of(settings).core.reprocess, "presets") == 0
    # the other file: same ids and codes, other names/descriptions/examples, no version field
    other = [replace(p, display_name=p.display_name + " (ko)",
                     examples=(*p.examples[:2], "새 예시")) for p in load_preset_file()]
    report = await upsert_presets(engine, other, provider)
    assert len(report.updated) == 27 and report.version == 2
    assert await count_candidates(engine, config_of(settings).core.reprocess, "presets") == 1


async def test_cues_are_stored_and_reach_the_snapshot(engine, sync_conn):
    provider = FakeEmbeddingProvider()
    await upsert_presets(engine, [replace(BASE[0], cues=("조용하다", "quiet")), *BASE[1:]],
                         provider)
    rows = dict(sync_conn.execute("SELECT id, cues FROM ai.keyword_preset").fetchall())
    assert rows[301] == ["조용하다", "quiet"] and rows[302] == ["큐"]
    async with engine.connect() as conn:
        snapshot = await load_snapshot(conn, provider.profile)
    assert snapshot.presets[0].cues == ("조용하다", "quiet")
    # cues are not embedded: changing only cues re-embeds nothing
    before = provider.calls
    report = await upsert_presets(engine, [replace(BASE[0], cues=("한적",)), *BASE[1:]], provider)
    assert report.updated == [301] and report.embedded == [] and provider.calls == before
