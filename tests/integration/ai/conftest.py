"""Fixtures of the ai integration tests: settings for the fake profile, fake providers (at their
Protocols only), a pipeline on the real test database, seeded presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlog.ai.pipeline import Pipeline
from pinlog.settings import Settings
from tests.integration.ai.support import ai_settings_for
from tests.conftest import config_of


class RecordingSleep:
    """Backoff sleep that records every delay and does not wait (retry timing stays testable)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)




@pytest.fixture
def ai_settings(tmp_path: Path, db_url: str) -> Settings:
    return ai_settings_for(tmp_path, db_url)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def pipeline(ai_settings, engine, provider, judge, presets, sleeps) -> Pipeline:
    return Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge, sleep=sleeps)
