"""The one in-process app runner: ``pinlog.app.create_app`` with its lifespan running (the
runtimes started and stopped as `pinlog serve` does), driven through httpx's ASGI transport.

Model providers are faked at their Protocol (``provider``, ``judge`` → ``AiRuntime``); omit
them to run the configured ones (the real-model tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI

from pinlog.app import create_app
from pinlog.core.api.auth import issue_token
from pinlog.settings import Settings
from tests.conftest import config_of


@dataclass
class RunningApp:
    """A running app and a client of it; ``core`` / ``ai`` are its runtimes (None when the
    process does not run that component); ``provider`` / ``judge`` the fakes it was given."""

    app: FastAPI
    http: httpx.AsyncClient
    settings: Settings
    provider: Any = None
    judge: Any = None

    @property
    def core(self) -> Any:  # the running CoreRuntime (or None)
        return self.app.state.core

    @property
    def ai(self) -> Any:  # the running AiRuntime (or None)
        return self.app.state.ai

    async def settle(self) -> None:
        """Wait until every dispatched request was handed over and every ai job finished."""
        if self.core is not None:
            await self.core.dispatcher.join()
        if self.ai is not None:
            await self.ai.join()

    async def member(self, external_ref: str | None = None) -> tuple[int, dict[str, str]]:
        """A new member and its Authorization header."""
        member_id = await self.core.service.create_member(external_ref)
        return member_id, {"Authorization": f"Bearer {issue_token(config_of(self.settings).core.auth, member_id)}"}


R = TypeVar("R", bound=RunningApp)


@contextlib.asynccontextmanager
async def running_app(settings: Settings, db_url: str | None, *,
                      components: tuple[str, ...] = ("core", "ai"),
                      provider: Any = None, judge: Any = None,
                      base_url: str = "http://pinlog.test",
                      raise_app_exceptions: bool = True,
                      kind: type[R] = RunningApp,  # type: ignore[assignment]
                      ) -> AsyncIterator[R]:
    """Yield a ``kind`` (:class:`RunningApp`) of the app running ``components`` on ``db_url``.
    With ``raise_app_exceptions=False`` an unhandled error is answered as the server would
    (500) instead of raised into the test."""
    ai_kwargs = {name: fake for name, fake in (("provider", provider), ("judge", judge))
                 if fake is not None}
    app = create_app(settings, components=components, database_url=db_url,  # type: ignore[arg-type]
                     ai_kwargs=ai_kwargs)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            yield kind(app, http, settings, provider, judge)


@contextlib.asynccontextmanager
async def running_ai(settings: Settings, db_url: str | None, provider: Any, judge: Any,
                     ) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """An ai-only app (the internal API) with fake model providers: yield ``(client, ai)``,
    ``ai`` being the running ``AiRuntime``."""
    async with running_app(settings, db_url, components=("ai",), provider=provider, judge=judge,
                           base_url="http://ai") as running:
        yield running.http, running.ai
