"""Composition root: builds the components a process runs (SPEC §1 deployment shapes).

This neutral module is the only place that knows both ``pinlog.ai`` and ``pinlog.core``: core
never imports ai. When both run in one process, core's process client is the ai runtime's
in-process ``submit`` (same contract as ``POST /internal/v1/context/process``); otherwise core
uses HTTP to ``PINLOG_AI_BASE_URL``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import SearchRequest, SearchResponse
from pinlog.settings import Settings

if TYPE_CHECKING:
    from pinlog.ai.runtime import AiRuntime
    from pinlog.core.runtime import CoreRuntime

log = logging.getLogger(__name__)


@dataclass
class Components:
    """The running runtimes of this process (either may be None)."""

    ai: AiRuntime | None
    core: CoreRuntime | None


def in_process_search(ai_runtime: AiRuntime) -> Callable[[SearchRequest], Awaitable[SearchResponse]]:
    """core's search client when both components run in this process (SPEC §10).

    Calls ``AiRuntime.search`` and maps its errors with the HTTP route's map
    (:func:`pinlog.ai.api.search_error`), then as :class:`pinlog.core.search.HttpSearchClient`
    does, so core sees the same outcomes either way: a profile mismatch → ``SearchRejected``
    (the route's 422, with both profiles), a model error → ``SearchUnavailable`` (the route's 503).
    """
    from pinlog.ai.api import search_error
    from pinlog.ai.errors import ModelError
    from pinlog.ai.search import ProfileMismatch
    from pinlog.core.search import SearchRejected, SearchUnavailable

    async def search(request: SearchRequest) -> SearchResponse:
        try:
            return await ai_runtime.search(request)
        except (ProfileMismatch, ModelError) as exc:
            status, answer = search_error(exc)
            if status == 422:
                raise SearchRejected(dict(answer)) from None
            raise SearchUnavailable("search unavailable") from None

    return search


@asynccontextmanager
async def running_components(
    settings: Settings,
    engine: AsyncEngine,
    *,
    ai: bool = True,
    core: bool = True,
    ai_kwargs: dict[str, Any] | None = None,
    core_kwargs: dict[str, Any] | None = None,
) -> AsyncIterator[Components]:
    """Start the ai runtime (if ``ai``), then the core runtime (if ``core``); stop in reverse.

    Args:
        ai_kwargs: extra keyword arguments for ``AiRuntime`` (tests pass fake providers).
        core_kwargs: extra keyword arguments for ``CoreRuntime``.

    Raises:
        whatever a runtime's ``start()`` raises (e.g. ai tables missing, no presets).
    """
    started: list[AiRuntime | CoreRuntime] = []
    ai_runtime: AiRuntime | None = None
    core_runtime: CoreRuntime | None = None
    try:
        if ai:
            from pinlog.ai.runtime import AiRuntime

            ai_runtime = AiRuntime(engine, settings, **(ai_kwargs or {}))
            await ai_runtime.start()
            started.append(ai_runtime)
        if core:
            from pinlog.core.runtime import CoreRuntime

            local = ai_runtime if settings.ai_base_url is None else None
            core_runtime = CoreRuntime(
                engine, settings,
                in_process_submit=local.submit if local is not None else None,
                in_process_search=in_process_search(local) if local is not None else None,
                **(core_kwargs or {}),
            )
            await core_runtime.start()
            started.append(core_runtime)
        yield Components(ai=ai_runtime, core=core_runtime)
    finally:
        for runtime in reversed(started):
            try:
                await runtime.stop()
            except Exception:  # noqa: BLE001 - shutdown must go on
                log.exception("component stop failed")
