"""core runtime: process client, dispatcher, services and the rescan loop (SPEC §1, §4, §7).

Built by :mod:`pinlog.composition`. The process client is HTTP when ``PINLOG_AI_BASE_URL`` is
set, otherwise the in-process adapter of the ai runtime of this process; with neither, a client
that logs and returns 0 (rows stay PENDING for the rescan).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import ProcessClient, ProcessRequest
from pinlog.core.dispatch import Dispatcher, HttpProcessClient, InProcessClient, UnconfiguredClient
from pinlog.core.services import CoreService
from pinlog.settings import Settings

if TYPE_CHECKING:
    from pinlog.core.rescan import RescanLoop
    from pinlog.core.search import SearchFn

log = logging.getLogger(__name__)


def build_client(settings: Settings,
                 in_process_submit: Callable[[ProcessRequest], Awaitable[int]] | None = None,
                 ) -> ProcessClient:
    """The process client for these settings (see module docstring)."""
    if settings.ai_base_url:
        return HttpProcessClient.from_settings(settings)
    if in_process_submit is not None:
        return InProcessClient(in_process_submit)
    return UnconfiguredClient()


class CoreRuntime:
    """core's running parts.

    Attributes:
        client: the :class:`pinlog.contracts.ProcessClient` in use.
        dispatcher: the :class:`pinlog.core.dispatch.Dispatcher` (bounded queue).
        service: the :class:`pinlog.core.services.CoreService`.
        search_client: the ai side's search: in-process ``AiRuntime.search``, or HTTP to
            ``PINLOG_AI_BASE_URL`` (None when there is no ai side).
        rescan: the rescan loop once started (``settings.rescan_enabled``), else None.
    """

    def __init__(self, engine: AsyncEngine, settings: Settings, *,
                 in_process_submit: Callable[[ProcessRequest], Awaitable[int]] | None = None,
                 in_process_search: SearchFn | None = None) -> None:
        self.settings, self.engine = settings, engine
        self.client = build_client(settings, in_process_submit)
        self.dispatcher = Dispatcher(self.client, queue_size=settings.dispatch_queue_size,
                                     workers=settings.dispatch_workers)
        self.service = CoreService(engine, self.dispatcher, settings)
        if settings.ai_base_url:
            from pinlog.core.search import HttpSearchClient

            self.search_client: SearchFn | None = HttpSearchClient(settings)
        else:
            self.search_client = in_process_search
        self.rescan: RescanLoop | None = None

    async def start(self) -> None:
        """Start the dispatcher, then the rescan loop when enabled."""
        self.dispatcher.start()
        if self.settings.rescan_enabled:
            from pinlog.core.rescan import RescanLoop

            self.rescan = RescanLoop(self.engine, self.settings, self.client)
            await self.rescan.start()

    async def stop(self) -> None:
        """Stop the rescan loop (if started), then drain and stop the dispatcher, then close
        the client."""
        grace = self.settings.shutdown_grace
        if self.rescan is not None:
            try:
                await self.rescan.stop(grace=grace)
            finally:
                self.rescan = None
        await self.dispatcher.stop(drain_timeout=grace)
        for client in (self.client, self.search_client):
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    async def ready(self) -> bool:
        """core has nothing beyond the database (checked by ``/ready`` itself)."""
        return True

    async def refresh_gauges(self) -> None:
        """Refresh the database-derived gauges for ``/metrics`` (SPEC §12)."""
        from pinlog.core.status import refresh_gauges

        await refresh_gauges(self.engine, self.settings)
