"""Fixtures of the retention tests (issue 31): settings with small purge batches, core's
services, the ai job with fake model providers, and the parts of the retention job."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlog.ai.pipeline import Pipeline
from pinlog.ai.retention import AiPurge
from pinlog.composition import Config
from pinlog.core.retention import CorePurge
from pinlog.core.services import CoreService
from pinlog.settings import Settings
from tests.conftest import config_of
from tests.fakes import FakeEmbeddingProvider
from tests.integration.ai.support import DIM, PROFILE, ai_settings_for
from tests.integration.retention.support import QuietProvider

#: Rows per purge transaction in these tests (small, so every purge takes several batches).
BATCH = 3


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return QuietProvider(PROFILE, DIM)


@pytest.fixture
def retention_settings(tmp_path: Path, db_url: str) -> Settings:
    return ai_settings_for(tmp_path, db_url, retention_batch_size=BATCH)


@pytest.fixture
def config(retention_settings: Settings) -> Config:
    return config_of(retention_settings)


@pytest.fixture
def core(engine, config: Config) -> CoreService:
    return CoreService(engine, None, config.core.service)


@pytest.fixture
def pipeline(engine, config: Config, provider, judge, presets) -> Pipeline:
    return Pipeline(engine, config.ai.pipeline, provider, judge)


@pytest.fixture
def ai_purge(engine, config: Config) -> AiPurge:
    return AiPurge(engine, config.ai.retention)


@pytest.fixture
def core_purge(engine, config: Config) -> CorePurge:
    return CorePurge(engine, config.core.retention)
