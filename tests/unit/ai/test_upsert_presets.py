"""``upsert_presets`` refusals that come before any database access (SPEC §8). The loads
themselves are ``tests/integration/ai/presets/test_presets_db.py``."""

from __future__ import annotations

import pytest

from pinlog.ai.presets import PresetFileError, upsert_presets
from pinlog.db.engine import create_engine
from tests.fakes import FakeEmbeddingProvider

#: nothing listens there: a test that reached the database would fail to connect
UNREACHABLE = "postgresql://nobody@127.0.0.1:9/none"


async def test_empty_list_is_refused_instead_of_retiring_everything():
    engine = create_engine(UNREACHABLE, pool_size=1)
    try:
        with pytest.raises(PresetFileError, match="no presets"):
            await upsert_presets(engine, [], FakeEmbeddingProvider())
    finally:
        await engine.dispose()
