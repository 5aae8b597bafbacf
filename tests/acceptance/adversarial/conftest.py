"""Fixtures of the adversarial probes: the full app (core + ai, fake models) on the real
PostgreSQL, driven in-process through httpx's ASGI transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from pinlog.app import create_app
from pinlog.core.api.auth import issue_token
from pinlog.settings import Settings
from tests.integration.ai.conftest import ai_settings_for
from tests.integration.ai.support import seed_presets


@dataclass
class Full:
    app: FastAPI
    http: httpx.AsyncClient
    settings: Settings
    provider: object
    judge: object

    @property
    def core(self):
        return self.app.state.core

    @property
    def ai(self):
        return self.app.state.ai

    async def member(self, external_ref: str | None = None) -> tuple[int, dict[str, str]]:
        member_id = await self.core.service.create_member(external_ref)
        return member_id, {"Authorization": f"Bearer {issue_token(self.settings, member_id)}"}

    async def settle(self) -> None:
        """Wait for core's dispatch queue and the ai work queue to drain."""
        import asyncio

        for _ in range(3):
            await asyncio.sleep(0.05)
            dispatcher = getattr(self.core, "dispatcher", None)
            join = getattr(dispatcher, "join", None)
            if join is not None:
                await join()
            await self.ai.join()


@contextlib.asynccontextmanager
async def full_app(settings: Settings, db_url: str, provider, judge,
                   components=("core", "ai")) -> AsyncIterator[Full]:
    app = create_app(settings, components=components, database_url=db_url,
                     ai_kwargs={"provider": provider, "judge": judge})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://pinlog.test") as http:
            yield Full(app, http, settings, provider, judge)


@pytest.fixture
def adv_settings(tmp_path, db_url) -> Settings:
    # generous model timeouts: a test may hold a model call at a gate for a while
    return ai_settings_for(tmp_path, db_url, embedding_timeout=30.0, llm_timeout=30.0)


@pytest.fixture
async def full(adv_settings, db_url, sync_conn, provider, judge) -> AsyncIterator[Full]:
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
