"""Fixtures of the search integration tests: the fake profile (8 dimensions) with vectors the
test controls, presets seeded for it (the ai runtime refuses to start without), and the app
running core and/or ai in this process on the real test database (fake providers only)."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

from pinlog.settings import Settings
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE, ai_settings_for
from tests.support.app import RunningApp
from tests.support.app import running_app as run_app

QUERY = "the query"


def at_cosine(c: float, axis: int = 1, dim: int = DIM) -> list[float]:
    """Unit vector whose cosine with ``e_0`` (the vector of :data:`QUERY`) is exactly ``c``;
    the rest of its length lies on ``axis`` (1..dim-1)."""
    v = [0.0] * dim
    v[0] = c
    v[axis] = math.sqrt(max(0.0, 1.0 - c * c))
    return v


search_settings_for = ai_settings_for


@pytest.fixture
def search_settings(tmp_path: Path, db_url: str) -> Settings:
    return search_settings_for(tmp_path, db_url)


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    """Fake provider: :data:`QUERY` → ``e_0``; other texts get deterministic vectors."""
    return FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: at_cosine(1.0)})


Running = RunningApp


def running_app(settings: Settings, db_url: str, provider: FakeEmbeddingProvider,
                judge: FakeJudge, components: tuple[str, ...] = ("core", "ai"),
                ) -> contextlib.AbstractAsyncContextManager[RunningApp]:
    """The app with its lifespan running (:func:`tests.support.app.running_app`)."""
    return run_app(settings, db_url, components=components, provider=provider, judge=judge)


def place_body(n: int, text: str, name: str | None = None) -> dict:
    """Body of ``POST /v1/records``."""
    return {"place": {"externalPlaceId": f"kakao-{n}", "name": name or f"place {n}",
                      "address": "서울 중구", "lat": 37.56, "lng": 126.97}, "text": text}
