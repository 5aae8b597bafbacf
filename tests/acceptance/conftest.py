"""Fixtures shared by the acceptance tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A local fake OpenAI-compatible server (embeddings + chat), stopped (and any held request
    released) at the end of the test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
