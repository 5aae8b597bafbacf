"""Fixtures of the adversarial probes: the full app (core + ai, fake models) on the real
PostgreSQL, driven in-process through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from pinlog.settings import Settings
from tests.integration.ai.conftest import ai_settings_for
from tests.integration.ai.support import seed_presets
from tests.support.app import RunningApp, running_app


class Full(RunningApp):
    """The full app (core + ai) with fake models; errors answered as the server would (500)."""

    async def settle(self) -> None:
        """Wait for core's dispatch queue and the ai work queue to drain (three passes: a
        drained job may dispatch again)."""
        for _ in range(3):
            await asyncio.sleep(0.05)
            dispatcher = getattr(self.core, "dispatcher", None)
            join = getattr(dispatcher, "join", None)
            if join is not None:
                await join()
            await self.ai.join()


def full_app(settings: Settings, db_url: str, provider, judge,
             components=("core", "ai")) -> contextlib.AbstractAsyncContextManager[Full]:
    return running_app(settings, db_url, components=components, provider=provider, judge=judge,
                       raise_app_exceptions=False, kind=Full)


@pytest.fixture
def adv_settings(tmp_path, db_url) -> Settings:
    # generous model timeouts: a test may hold a model call at a gate for a while
    return ai_settings_for(tmp_path, db_url, embedding_timeout=30.0, llm_timeout=30.0)


@pytest.fixture
async def full(adv_settings, db_url, sync_conn, provider, judge):
    seed_presets(sync_conn)
    async with full_app(adv_settings, db_url, provider, judge) as value:
        yield value


def record_body(n: int = 1, text: str = "조용히 책 읽기 좋은 카페", name: str = "카페 온다") -> dict:
    return {"place": {"externalPlaceId": f"kakao-{n}", "name": name, "address": "서울 중구",
                      "lat": 37.56, "lng": 126.97}, "text": text}


def table_counts(conn) -> dict[str, int]:
    """Row counts of every core.* and ai.* table (to assert that nothing was written)."""
    out = {}
    for (name,) in conn.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
            "WHERE schemaname IN ('core', 'ai') ORDER BY 1").fetchall():
        out[name] = conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
    return out
