"""Issue 14, deliverables 2 and 3 on an adopted database: readiness of an ai-only process = our
ai tables at our revision (ai.alembic_version) + presets loaded — whatever created ``core``; the
preset vectors stored on the reference's preset rows are used for their own profile and
re-embedded (``pinlog presets load``) for another."""

from __future__ import annotations

import psycopg

from pinlog.ai.presets import load_snapshot, parse_presets, upsert_presets
from pinlog.db import migrate
from pinlog.db.engine import create_engine
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.adoption.reference import REF_DIM, REF_PROFILE, REF_PRESETS
from tests.integration.ai.support import DIM, PROFILE, ai_settings_for
from tests.support.app import running_ai


async def _ready(settings, url, provider) -> list[int]:
    """``/ready`` status codes of an ai-only app while the test changes the database."""
    codes = []
    async with running_ai(settings, url, provider, FakeJudge()) as (client, _ai):
        with psycopg.connect(url, autocommit=True) as conn:
            codes.append((await client.get("/ready")).status_code)
            conn.execute("UPDATE ai.alembic_version SET version_num = '0001'")
            codes.append((await client.get("/ready")).status_code)   # not our revision
            conn.execute("UPDATE ai.alembic_version SET version_num = %s", (migrate.head(),))
            codes.append((await client.get("/ready")).status_code)
            conn.execute("UPDATE ai.keyword_preset SET is_active = false")
            codes.append((await client.get("/ready")).status_code)   # no presets loaded
    return codes


async def test_ai_only_readiness_is_our_revision_and_presets(reference_url, tmp_path):
    migrate.adopt(reference_url, REF_DIM)
    settings = ai_settings_for(tmp_path, reference_url, embedding_profile=REF_PROFILE,
                               embedding_dimension=REF_DIM)
    provider = FakeEmbeddingProvider(REF_PROFILE, REF_DIM)
    assert await _ready(settings, reference_url, provider) == [200, 503, 200, 503]


def _our_presets(ids=(101, 201, 301)) -> list:
    return parse_presets([
        {"id": pid, "code": REF_PRESETS[pid][0], "display_name": REF_PRESETS[pid][0].title(),
         "category": REF_PRESETS[pid][1], "description": f"{REF_PRESETS[pid][0]} description",
         "examples": ["ex one", "ex two"]} for pid in ids])


async def test_preset_vectors_used_for_their_profile_re_embedded_for_another(reference_url):
    migrate.adopt(reference_url, DIM)  # our profile has 8 dimensions: the column is relaxed
    engine = create_engine(reference_url, pool_size=2)
    try:
        async with engine.connect() as conn:
            # the vectors carried by the preset rows serve their own profile at once …
            assert [p.id for p in (await load_snapshot(conn, REF_PROFILE)).presets] == \
                [101, 201, 301, 501]
            # … and never another (SPEC §9)
            assert len(await load_snapshot(conn, PROFILE)) == 0
        provider = FakeEmbeddingProvider(PROFILE, DIM)
        report = await upsert_presets(engine, _our_presets(), provider)
        assert report.changed
        async with engine.connect() as conn:
            snapshot = await load_snapshot(conn, PROFILE)
        assert [p.id for p in snapshot.presets] == [101, 201, 301]
        assert snapshot.matrix.shape == (3, DIM)
        again = await upsert_presets(engine, _our_presets(), provider)
        assert not again.changed  # idempotent on the adopted table too
    finally:
        await engine.dispose()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        # the reference's own columns on the preset rows are left as they were
        assert conn.execute("SELECT count(*) FROM ai.keyword_preset WHERE embedding_profile = %s "
                            "AND vector_dims(embedding) = %s", (REF_PROFILE, REF_DIM)).fetchone()[0] == 4
        # a free-text category of the reference stays readable (501 retired: not in our list)
        assert conn.execute("SELECT category, is_active FROM ai.keyword_preset WHERE id = 501"
                            ).fetchone() == ("TIME_OF_DAY", False)
