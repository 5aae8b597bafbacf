"""Fixtures of the search integration tests: the fake profile (8 dimensions) with vectors the
test controls, presets seeded for it (the ai runtime refuses to start without), and the app
running core and/or ai in this process on the real test database (fake providers only)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from pinlog.app import create_app
from pinlog.core.api.auth import issue_token
from pinlog.settings import Settings
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE, ai_settings_for

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


@dataclass
class Running:
    app: FastAPI
    http: httpx.AsyncClient
    settings: Settings

    @property
    def ai(self):  # the running AiRuntime (or None)
        return self.app.state.ai

    @property
    def core(self):  # the running CoreRuntime (or None)
        return self.app.state.core

    async def settle(self) -> None:
        """Wait until every dispatched request was handed over and every ai job finished."""
        if self.core is not None:
            await self.core.dispatcher.join()
        if self.ai is not None:
            await self.ai.join()

    async def member(self) -> tuple[int, dict[str, str]]:
        """A new member and its Authorization header."""
        member_id = await self.core.service.create_member()
        return member_id, {"Authorization": f"Bearer {issue_token(self.settings, member_id)}"}


@contextlib.asynccontextmanager
async def running_app(settings: Settings, db_url: str, provider: FakeEmbeddingProvider,
                      judge: FakeJudge, components: tuple[str, ...] = ("core", "ai"),
                      ) -> AsyncIterator[Running]:
    """The app with its lifespan running, driven through httpx's ASGI transport."""
    app = create_app(settings, components=components, database_url=db_url,  # type: ignore[arg-type]
                     ai_kwargs={"provider": provider, "judge": judge})
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://pinlog.test") as http:
            yield Running(app, http, settings)


def place_body(n: int, text: str, name: str | None = None) -> dict:
    """Body of ``POST /v1/records``."""
    return {"place": {"externalPlaceId": f"kakao-{n}", "name": name or f"place {n}",
                      "address": "서울 중구", "lat": 37.56, "lng": 126.97}, "text": text}
