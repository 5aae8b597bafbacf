"""Fixtures registered once for the whole suite (``pytest_plugins`` in ``tests/conftest.py``).

A directory's conftest overrides one of them only where its tests need something else (e.g. the
search tests' provider maps the query to a known vector).
"""

from __future__ import annotations

import psycopg
import pytest

from collections.abc import Iterator

from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE, TEXT_VECTORS, seed_presets
from tests.support.fake_openai import FakeOpenAI


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    """Fake embedding provider of the fake profile; the shared test texts get fixed vectors."""
    return FakeEmbeddingProvider(PROFILE, DIM, vectors=TEXT_VECTORS)


@pytest.fixture
def judge() -> FakeJudge:
    """Fake keyword judge (counts calls; picks by its own rule)."""
    return FakeJudge()


@pytest.fixture
def presets(sync_conn: psycopg.Connection) -> None:
    """The fake profile's presets, seeded in the test database."""
    seed_presets(sync_conn)


@pytest.fixture
def fake_openai(request: pytest.FixtureRequest) -> Iterator[FakeOpenAI]:
    """A started local fake OpenAI-compatible server (embeddings + chat), stopped (and any held
    or trickling request released) at the end of the test. Parametrise it indirectly with the
    constructor's keywords (``profile``, ``api_key``, ``models``, ``rate`` …)::

        @pytest.mark.parametrize("fake_openai", [{"profile": "tei"}], indirect=True)
    """
    server = FakeOpenAI(**getattr(request, "param", {})).start()
    try:
        yield server
    finally:
        server.stop()
