"""Placeholder ai runtime (replaced by the ai pipeline work, issue 3)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.settings import Settings


class AiRuntime:
    def __init__(self, settings: Settings, engine: AsyncEngine) -> None:
        self.settings, self.engine = settings, engine

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def ready(self) -> bool:
        return True

    def submit(self, request: object) -> object:
        raise NotImplementedError

    async def search(self, request: object) -> object:
        raise NotImplementedError
