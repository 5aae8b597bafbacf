"""Fixtures of the robustness tests (issue: degenerate vectors, Unicode, long notes, a busy
model, changed dimensions): a local fake OpenAI-compatible server where a provider must
misbehave, the real database, the app driven in process."""

from __future__ import annotations


import pytest




@pytest.fixture
def presets(sync_conn) -> None:
    """The test presets for the fake profile (the ai runtime refuses to start without)."""
    from tests.integration.ai.support import seed_presets

    seed_presets(sync_conn)
