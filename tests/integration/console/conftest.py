"""Fixtures of the console tests: the app (core + ai in this process, fake model providers at
their Protocols, the real database) with both console tokens configured, and a logged-in
client per role."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pinlog.settings import Settings
from tests.integration.ai.support import ai_settings_for
from tests.support.app import RunningApp, running_app

ADMIN_TOKEN = "admin-console-token-0123456789"
READ_TOKEN = "read-console-token-0123456789"
#: Notes whose text must never show up on a read-only page.
SECRET_NOTE = "비밀메모 조용한 한정식집 부모님과"
OTHER_NOTE = "privatenote quiet teahouse with my parents"


def console_settings(tmp_path: Path, db_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "console_admin_token": ADMIN_TOKEN, "console_read_token": READ_TOKEN,
        "console_refresh": 0.5, "search_floor": -1.0, "search_short_query_floor": -1.0,
        "search_ratio": -1.0, **overrides}
    return ai_settings_for(tmp_path, db_url, **values)


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    return console_settings(tmp_path, db_url)


@contextlib.asynccontextmanager
async def console_app(settings: Settings, db_url: str, provider: object, judge: object,
                      ) -> AsyncIterator[RunningApp]:
    async with running_app(settings, db_url, provider=provider, judge=judge) as app:
        yield app


def csrf_of(html: str) -> str:
    """The CSRF token of a console page's forms."""
    match = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


async def login(http: httpx.AsyncClient, token: str) -> httpx.Response:
    """Log ``http`` in with ``token`` (the login form's nonce first); the POST's answer."""
    form = await http.get("/console/login")
    nonce = re.search(r'name="nonce" value="([0-9a-f]+)"', form.text).group(1)
    return await http.post("/console/login", data={"nonce": nonce, "token": token})


async def create_notes(app: RunningApp, texts: list[str]) -> tuple[int, list[int]]:
    """A member with one record per text (through the public API), processed; the member id
    and the context ids."""
    member_id, auth = await app.member("console-member")
    contexts = []
    for i, text in enumerate(texts):
        body = {"place": {"externalPlaceId": f"console-{i}", "name": f"place {i}",
                          "address": "서울", "lat": 37.5, "lng": 127.0}, "text": text}
        contexts.append((await app.http.post("/v1/records", json=body, headers=auth)).json()["contextId"])
    await app.settle()
    return member_id, contexts
