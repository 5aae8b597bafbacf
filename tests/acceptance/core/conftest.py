"""Fixtures for the public API tests: the app (core component only, real PostgreSQL) driven
through httpx's ASGI transport with the lifespan running; tokens for members."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from pinlog.app import create_app
from pinlog.core.api.auth import issue_token
from pinlog.settings import Settings


@dataclass
class Api:
    app: FastAPI
    http: httpx.AsyncClient
    settings: Settings

    @property
    def core(self):  # the running CoreRuntime
        return self.app.state.core

    async def member(self, external_ref: str | None = None) -> tuple[int, dict[str, str]]:
        """A new member and its Authorization header."""
        member_id = await self.core.service.create_member(external_ref)
        return member_id, {"Authorization": f"Bearer {issue_token(self.settings, member_id)}"}


async def start_api(settings: Settings, db_url: str) -> AsyncIterator[Api]:
    app = create_app(settings, components=("core",), database_url=db_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://pinlog.test") as http:
            yield Api(app, http, settings)


@pytest.fixture
async def api(settings: Settings, db_url: str) -> AsyncIterator[Api]:
    async for value in start_api(settings, db_url):
        yield value


def record_body(n: int = 1, text: str = "조용한 카페", name: str = "카페 온다") -> dict:
    return {"place": {"externalPlaceId": f"kakao-{n}", "name": name, "address": "서울 중구",
                      "lat": 37.56, "lng": 126.97}, "text": text}
