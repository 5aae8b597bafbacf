"""Fixtures for the public API tests: the app (core component only, real PostgreSQL) driven
through httpx's ASGI transport with the lifespan running; tokens for members."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pinlog.settings import Settings
from tests.support.app import RunningApp, running_app

Api = RunningApp


async def start_api(settings: Settings, db_url: str) -> AsyncIterator[Api]:
    async with running_app(settings, db_url, components=("core",)) as api:
        yield api


@pytest.fixture
async def api(settings: Settings, db_url: str) -> AsyncIterator[Api]:
    async for value in start_api(settings, db_url):
        yield value


def record_body(n: int = 1, text: str = "조용한 카페", name: str = "카페 온다") -> dict:
    return {"place": {"externalPlaceId": f"kakao-{n}", "name": name, "address": "서울 중구",
                      "lat": 37.56, "lng": 126.97}, "text": text}
