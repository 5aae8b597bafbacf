"""FastAPI application factory (SPEC §1 deployment shapes).

``create_app`` mounts the core routers (public ``/v1`` API), the ai routers (``/internal/v1``)
or both (the default, one process), plus ``/health``, ``/ready`` and ``/metrics``. The lifespan
opens the database (external or embedded), starts each component's background machinery and
stops it in reverse order.

Components are built by :mod:`pinlog.composition` (core never imports ai).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from pinlog import __version__
from pinlog.composition import running_components
from pinlog.db.engine import create_engine, resolve_database_url
from pinlog.db.migrate import VERSION_SCHEMA, head
from pinlog.db.process_settings import ProcessRegistry
from pinlog.settings import Settings, get_settings

Component = Literal["core", "ai"]


def create_app(
    settings: Settings | None = None,
    *,
    components: tuple[Component, ...] = ("core", "ai"),
    database_url: str | None = None,
    ai_kwargs: dict[str, object] | None = None,
    core_kwargs: dict[str, object] | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings: defaults to :func:`pinlog.settings.get_settings`.
        components: which components this process runs (``core``, ``ai`` or both).
        database_url: libpq URL overriding the configured/embedded database (tests).
        ai_kwargs, core_kwargs: extra runtime arguments (tests pass fake model providers).
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or resolve_database_url(settings)
        engine = create_engine(url, pool_size=settings.db_pool_size)
        app.state.settings = settings
        app.state.engine = engine
        try:
            async with running_components(settings, engine, ai="ai" in components,
                                          core="core" in components, ai_kwargs=ai_kwargs,
                                          core_kwargs=core_kwargs) as running:
                app.state.ai = running.ai
                app.state.core = running.core
                # issue 16 #7: record the rule-relevant settings; ERROR when a live replica
                # runs with other values (never refuses to start)
                registry = ProcessRegistry(engine, settings, components)
                await registry.start()
                try:
                    yield
                finally:
                    await registry.stop()
        finally:
            await engine.dispose()

    app = FastAPI(title="PinLog AI", version=__version__, lifespan=lifespan)

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers. Touches no database."""
        return {"status": "ok"}

    @app.get("/ready", tags=["ops"])
    async def ready() -> Response:
        """Readiness: database reachable, our tables at our revision (our own version table,
        ``ai.alembic_version`` — also on an adopted database whose backend owns ``core``, SPEC
        §2.2) and each component ready (the ai side: its tables present and presets loaded).
        Reveals no configuration."""
        try:
            async with app.state.engine.connect() as conn:
                version = (await conn.execute(
                    text(f"SELECT version_num FROM {VERSION_SCHEMA}.alembic_version"))).scalar()
        except Exception:  # noqa: BLE001 - any failure means not ready
            return JSONResponse({"status": "unavailable"}, status_code=503)
        if version != head():
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
        from pinlog.ai.search_api import router as ai_search_router

        app.include_router(ai_router)
        app.include_router(ai_search_router)
    if "core" in components:
        from pinlog.core.api import router as core_router

        app.include_router(core_router)
    return app
