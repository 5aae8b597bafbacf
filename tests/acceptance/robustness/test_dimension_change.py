"""Dimension change under the same profile name (SPEC §9): at start-up the provider's real
output length is checked against PINLOG_EMBEDDING_DIMENSION, the profile's preset vectors and
its stored embeddings; a mismatch refuses to start with one line naming the fix."""

from __future__ import annotations

import numpy as np
import pytest

from pinlog.ai.runtime import AiRuntime
from pinlog.errors import StartupError
from tests.conftest import make_settings, config_of
from tests.fakes import FakeJudge
from tests.integration.ai.support import insert_embedding, insert_state, vec_text

PROFILE = "openai-compatible-test-v1"


def _settings(tmp_path, db_url, fake, dimension: int):
    return make_settings(tmp_path, db_url, embedding_provider="openai",
                         embedding_base_url=fake.base_url, embedding_api_key="sk-test",
                         embedding_profile=PROFILE, embedding_dimension=dimension,
                         embedding_timeout=5.0, llm_timeout=5.0)


def _seed_presets(conn, dimension: int) -> None:
    vector = vec_text(list(np.eye(dimension)[0]))
    for pid in (1, 2):
        conn.execute("INSERT INTO ai.keyword_preset (id, code, display_name, category, description,"
                     " examples) VALUES (%s, %s, %s, 'ACTIVITY', 'd', ARRAY['e'])",
                     (pid, f"P{pid}", f"P{pid}"))
        conn.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                     "embedding) VALUES (%s, %s, %s::vector)", (pid, PROFILE, vector))


async def _start(settings, engine) -> AiRuntime:
    runtime = AiRuntime(engine, config_of(settings).ai, judge=FakeJudge())
    await runtime.start()
    return runtime


def _one_line_with_the_fix(message: str) -> None:
    assert "\n" not in message
    assert PROFILE in message and "PINLOG_EMBEDDING_PROFILE" in message
    assert "pinlog reprocess --profile" in message


async def test_provider_dimension_differs_from_setting(tmp_path, db_url, engine, sync_conn,
                                                       fake_openai):
    fake_openai.dimension = 256  # the model behind the endpoint was swapped
    _seed_presets(sync_conn, 384)
    with pytest.raises(StartupError) as refused:
        await _start(_settings(tmp_path, db_url, fake_openai, 384), engine)
    _one_line_with_the_fix(str(refused.value))
    assert "256" in str(refused.value)


async def test_setting_changed_but_presets_of_the_profile_have_the_old_dimension(
        tmp_path, db_url, engine, sync_conn, fake_openai):
    fake_openai.dimension = 256
    _seed_presets(sync_conn, 384)  # loaded when the profile meant 384 dimensions
    with pytest.raises(StartupError) as refused:
        await _start(_settings(tmp_path, db_url, fake_openai, 256), engine)
    _one_line_with_the_fix(str(refused.value))
    assert "preset" in str(refused.value) and "384" in str(refused.value)


async def test_stored_embeddings_of_the_profile_have_the_old_dimension(
        tmp_path, db_url, engine, sync_conn, fake_openai):
    fake_openai.dimension = 256
    _seed_presets(sync_conn, 256)  # presets reloaded, but old notes keep 384-long vectors
    insert_state(sync_conn, 1, "COMPLETED", "COMPLETED")
    insert_embedding(sync_conn, 1, list(np.eye(384)[3]), profile=PROFILE)
    with pytest.raises(StartupError) as refused:
        await _start(_settings(tmp_path, db_url, fake_openai, 256), engine)
    _one_line_with_the_fix(str(refused.value))
    assert "stored embeddings have 384" in str(refused.value)


async def test_consistent_dimension_starts_and_is_ready(tmp_path, db_url, engine, sync_conn,
                                                        fake_openai):
    fake_openai.dimension = 256
    _seed_presets(sync_conn, 256)
    insert_state(sync_conn, 1, "COMPLETED", "COMPLETED")
    insert_embedding(sync_conn, 1, list(np.eye(256)[3]), profile=PROFILE)
    insert_embedding(sync_conn, 2, list(np.eye(384)[3]), profile="an-older-profile-v1")
    runtime = await _start(_settings(tmp_path, db_url, fake_openai, 256), engine)
    try:
        assert await runtime.ready()
    finally:
        await runtime.stop()


async def test_local_model_with_another_dimension_setting_is_one_line(tmp_path, db_url, engine):
    settings = make_settings(tmp_path, db_url, embedding_dimension=256)  # local-e5 is 384
    with pytest.raises(StartupError) as refused:
        await AiRuntime(engine, config_of(settings).ai, judge=FakeJudge()).start()
    message = str(refused.value)
    assert "\n" not in message and "384" in message and "pinlog reprocess --profile" in message
