"""core runtime: process client, dispatcher, services and the rescan loop (SPEC §1, §4, §7).

Built by :mod:`pinlog.composition`. The process client is HTTP when ``PINLOG_AI_BASE_URL`` is
set, otherwise the in-process adapter of the ai runtime of this process; with neither, a client
that logs and returns 0 (rows stay PENDING for the rescan).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.channels.base import RelevanceRule
from pinlog.contracts import ProcessClient, ProcessRequest
from pinlog.core.api.auth import AuthConfig
from pinlog.core.dispatch import (DispatchConfig, Dispatcher, HttpProcessClient, InProcessClient,
                                  UnconfiguredClient)
from pinlog.core.reprocess import ReprocessConfig
from pinlog.core.rescan import RescanConfig
from pinlog.core.retention import CoreRetentionConfig
from pinlog.core.search import SearchConfig
from pinlog.core.services import CoreService, ServiceConfig
from pinlog.core.status import CountCompactor, StatusConfig
from pinlog.settings import Settings

if TYPE_CHECKING:
    from pinlog.core.rescan import RescanLoop
    from pinlog.core.search import SearchFn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CoreConfig:
    """Everything the core component reads, built once from the settings
    (:func:`pinlog.composition.build_config`); each part goes to the one component that uses it.

    Attributes:
        service, dispatch, rescan, search, status, reprocess, auth, retention: the
            components' configs.
        shutdown_grace: ``PINLOG_SHUTDOWN_GRACE``, seconds a running round and the dispatch
            queue get on stop.
    """

    service: ServiceConfig
    dispatch: DispatchConfig
    rescan: RescanConfig
    search: SearchConfig
    status: StatusConfig
    reprocess: ReprocessConfig
    auth: AuthConfig
    shutdown_grace: float
    retention: CoreRetentionConfig

    @classmethod
    def from_settings(cls, settings: Settings, *, profile: str,
                      relevance: RelevanceRule | None = None) -> CoreConfig:
        """Args: ``profile`` — the embedding profile in force; ``relevance`` — the search
        decision's parameters (both from the ai side's config, as values: core never imports
        ai; the ai side's hybrid search decides with the same rule). Without ``relevance``:
        the settings' thresholds and no calibrated strengths."""
        search = SearchConfig.from_settings(settings, profile=profile)
        if relevance is not None:
            search = replace(search, rule=relevance)
        return cls(service=ServiceConfig.from_settings(settings),
                   dispatch=DispatchConfig.from_settings(settings),
                   rescan=RescanConfig.from_settings(settings),
                   search=search,
                   status=StatusConfig.from_settings(settings),
                   reprocess=ReprocessConfig.from_settings(settings, profile=profile),
                   auth=AuthConfig.from_settings(settings),
                   shutdown_grace=settings.shutdown_grace,
                   retention=CoreRetentionConfig.from_settings(settings))


#: The ai runtime's in-process adapter of the process-batch route (``AiRuntime.submit_batch``).
SubmitBatch = Callable[[Sequence[ProcessRequest]], Awaitable[list[int]]]


def build_client(config: DispatchConfig,
                 in_process_submit: Callable[[ProcessRequest], Awaitable[int]] | None = None,
                 in_process_submit_batch: SubmitBatch | None = None) -> ProcessClient:
    """The process client for this configuration (see module docstring); every one of them is
    also a :class:`pinlog.contracts.BatchProcessClient`."""
    if config.ai_base_url:
        return HttpProcessClient.from_config(config)
    if in_process_submit is not None:
        return InProcessClient(in_process_submit, in_process_submit_batch)
    return UnconfiguredClient()


class CoreRuntime:
    """core's running parts.

    Args:
        config: the core configuration.
        in_process_submit / in_process_submit_batch / in_process_search: the ai runtime of this
            process (composition).
        rescan: run the rescan loop (default ``config.rescan.enabled``); one-shot commands pass
            False so only their own rounds run (SPEC §7).
        owner: this process's id (``ProcessRegistry.process_id``), recorded as the owner of the
            rows it creates and claims (SPEC §7.3.1); None → no owner (expiry backstop).

    Attributes:
        client: the :class:`pinlog.contracts.ProcessClient` in use.
        dispatcher: the :class:`pinlog.core.dispatch.Dispatcher` (bounded queue).
        service: the :class:`pinlog.core.services.CoreService`.
        search_client: the ai side's search: in-process ``AiRuntime.search``, or HTTP to
            ``PINLOG_AI_BASE_URL`` (None when there is no ai side).
        rescan: the rescan loop once started (when enabled), else None.
    """

    def __init__(self, engine: AsyncEngine, config: CoreConfig, *,
                 in_process_submit: Callable[[ProcessRequest], Awaitable[int]] | None = None,
                 in_process_submit_batch: SubmitBatch | None = None,
                 in_process_search: SearchFn | None = None, rescan: bool | None = None,
                 owner: str | None = None) -> None:
        self.config, self.engine = config, engine
        self.owner = owner
        self.run_rescan = config.rescan.enabled if rescan is None else rescan
        self.client = build_client(config.dispatch, in_process_submit, in_process_submit_batch)
        self.dispatcher = Dispatcher(self.client, queue_size=config.dispatch.queue_size,
                                     workers=config.dispatch.workers,
                                     busy_wait=config.dispatch.busy_wait)
        self.service = CoreService(engine, self.dispatcher, config.service, owner=owner)
        if config.dispatch.ai_base_url:
            from pinlog.core.search import HttpSearchClient

            self.search_client: SearchFn | None = HttpSearchClient(config.search, config.dispatch)
        else:
            self.search_client = in_process_search
        self.rescan: RescanLoop | None = None
        self.compactor = CountCompactor(engine)

    async def start(self) -> None:
        """Start the dispatcher, the state-count compactor, then the rescan loop when enabled. A
        long-running process (the rescan loop runs: ``pinlog serve``) loads the Korean analyser
        of search's lexical channel now (~3-5 s), not inside the first search; one-shot commands
        do not pay it."""
        self.dispatcher.start()
        self.compactor.start()
        if self.run_rescan:
            from pinlog.core.rescan import RescanLoop
            from pinlog.text import warm_up

            await asyncio.to_thread(warm_up)
            self.rescan = RescanLoop(self.engine, self.config.rescan, self.client,
                                     owner=self.owner)
            await self.rescan.start()

    async def stop(self) -> None:
        """Stop the rescan loop (if started), then drain and stop the dispatcher, then close
        the client."""
        grace = self.config.shutdown_grace
        await self.compactor.stop()
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

        await refresh_gauges(self.engine, self.config.status)
