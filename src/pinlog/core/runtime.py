"""Placeholder core runtime (issue 4)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.settings import Settings


class CoreRuntime:
    def __init__(self, settings: Settings, engine: AsyncEngine, *, in_process_submit=None,
                 in_process_search=None) -> None:
        self.settings, self.engine = settings, engine

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def ready(self) -> bool:
        return True

    async def refresh_gauges(self) -> None: ...
