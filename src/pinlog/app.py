"""FastAPI application factory (SPEC §1 deployment shapes).

``create_app`` mounts the core routers (public ``/v1`` API), the ai routers (``/internal/v1``)
or both (the default, one process), plus ``/health``, ``/ready`` and ``/metrics``. The lifespan
opens the database (external or embedded), starts each component's background machinery and
stops it in reverse order.

core never imports ai: when both run in one process, the app hands core the ai runtime's
``submit`` function as its in-process process client (same contract as HTTP, SPEC §4).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from pinlog import __version__
from pinlog.db.engine import create_engine, resolve_database_url
from pinlog.db.migrate import HEAD
from pinlog.settings import Settings, get_settings

log = logging.getLogger(__name__)

Component = Literal["core", "ai"]


def create_app(
    settings: Settings | None = None,
    *,
    components: tuple[Component, ...] = ("core", "ai"),
    database_url: str | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings: defaults to :func:`pinlog.settings.get_settings`.
        components: which components this process runs (``core``, ``ai`` or both).
        database_url: libpq URL overriding the configured/embedded database (tests).
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or resolve_database_url(settings)
        engine = create_engine(url, pool_size=settings.db_pool_size)
        app.state.settings = settings
        app.state.engine = engine
        started: list[object] = []
        ai_runtime = None
        try:
            if "ai" in components:
                from pinlog.ai.runtime import AiRuntime

                ai_runtime = AiRuntime(settings, engine)
                await ai_runtime.start()
                started.append(ai_runtime)
                app.state.ai = ai_runtime
            if "core" in components:
                from pinlog.core.runtime import CoreRuntime

                core_runtime = CoreRuntime(
                    settings, engine,
                    in_process_submit=ai_runtime.submit if ai_runtime is not None else None,
                    in_process_search=ai_runtime.search if ai_runtime is not None else None,
                )
                await core_runtime.start()
                started.append(core_runtime)
                app.state.core = core_runtime
            yield
        finally:
            for runtime in reversed(started):
                try:
                    await runtime.stop()  # type: ignore[attr-defined]
                except Exception:  # noqa: BLE001 - shutdown must go on
                    log.exception("component stop failed")
            await engine.dispose()

    app = FastAPI(title="PinLog AI", version=__version__, lifespan=lifespan)

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers. Touches no database."""
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"])
    async def ready() -> Response:
        """Readiness: database reachable and migrated, and each component ready (presets
        loaded for the ai side). Reveals no configuration."""
        try:
            async with app.state.engine.connect() as conn:
                version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
        except Exception:  # noqa: BLE001 - any failure means not ready
            return JSONResponse({"status": "unavailable"}, status_code=503)
        if version != HEAD:
            return JSONResponse({"status": "unavailable"}, status_code=503)
        for name in ("ai", "core"):
            runtime = getattr(app.state, name, None)
            if runtime is not None and not await runtime.ready():
                return JSONResponse({"status": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def metrics() -> Response:
        core = getattr(app.state, "core", None)
        if core is not None:
            await core.refresh_gauges()
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    if "ai" in components:
        from pinlog.ai.api import router as ai_router

        app.include_router(ai_router)
    if "core" in components:
        from pinlog.core.api import router as core_router

        app.include_router(core_router)
    return app
