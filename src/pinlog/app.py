"""FastAPI application factory (SPEC §1 deployment shapes).

``create_app`` mounts the core routers (public ``/v1`` API, the operator API ``/ops/v1`` and,
when configured, the operator console ``/console``), the ai routers (``/internal/v1``) or both
(the default, one process), plus ``/health``, ``/ready`` and ``/metrics``. The lifespan
opens the database (external or embedded), starts each component's background machinery
(:func:`started_components`) and stops it in reverse order — unless the components were started
already (``started``: ``pinlog serve`` starts them once, before uvicorn binds its port, so a
component that refuses to start is one line and exit 2, not a lifespan traceback). Either way
the lifespan logs one start-up line (the process registry — rule-relevant settings, the
heartbeat lease its claims' ownership rests on — lives as long as the components:
:func:`started_components`).

Components and their configuration are built by :mod:`pinlog.composition` (core never imports
ai).

Every request passes :class:`RequestGuard` (outermost app middleware): it counts requests and
latency by route template and status, and turns an exception that escaped a route into a JSON
answer — ``503`` with ``Retry-After`` when the database is unavailable, ``500`` for a bug — logged
with method, path, request id and (for a bug) the redacted traceback; never note text. Inside it,
:class:`pinlog.http.BodyLimit` refuses a body over its route's limit (:func:`body_limits`) with
``413`` before reading it, and :func:`pinlog.http.install_error_handlers` renders the framework's
own errors (404, 405, 400, 422) in the one envelope ``{"error", "message"}`` (issue 27).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import __version__
from pinlog import metrics as m
from pinlog.composition import Components, Config, build_config, replica_rules, running_components
from pinlog.contracts import PROCESS_BATCH_PATH, REQUEST_ID_HEADER
from pinlog.db.engine import (
    create_engine,
    is_database_unavailable,
    ping,
    redacted_url,
    resolve_database_url,
)
from pinlog.db.migrate import database_revision, head
from pinlog.db.process_settings import ProcessRegistry
from pinlog.http import (
    UNMATCHED_ROUTE,
    BodyLimit,
    BodyLimits,
    error_body,
    install_error_handlers,
    method_label,
)
from pinlog.logs import log_context
from pinlog.settings import Settings, get_settings

Component = Literal["core", "ai"]
log = logging.getLogger("pinlog.http")

#: Seconds a client is told to wait when the database is unavailable.
RETRY_AFTER_SECONDS = 5
#: Seconds ``/metrics`` waits for its database read before serving the last values.
METRICS_DB_TIMEOUT = 3.0
DB_UNAVAILABLE_BODY = error_body("DATABASE_UNAVAILABLE", "the database is unavailable, retry later")
INTERNAL_BODY = error_body("INTERNAL", "internal error")
NOT_READY_BODY = {"status": "unavailable",
                  **error_body("NOT_READY", "not ready (database, schema revision or presets)")}
#: Body limit of ``POST /v1/search``, bytes: a query is at most 500 characters.
SEARCH_BODY_BYTES = 16 * 1024


def body_limits(settings: Settings) -> BodyLimits:
    """The request-body limits of the app (bytes, README "Public API"): ``POST /v1/search``
    :data:`SEARCH_BODY_BYTES`; ``POST /internal/v1/context/process-batch``
    ``Settings.batch_body_limit()`` (many notes; its secret is checked before the body is read);
    every other route ``Settings.body_limit()``."""
    return BodyLimits(default=settings.body_limit(),
                      routes={("POST", "/v1/search"): SEARCH_BODY_BYTES,
                              ("POST", PROCESS_BATCH_PATH): settings.batch_body_limit()})


class RequestGuard:
    """Pure ASGI middleware: HTTP metrics, and a JSON answer for any exception a route let out.

    * ``pinlog_http_requests_total{route,method,status}`` and ``pinlog_http_request_seconds``
      (route = the matched route template, e.g. ``/v1/records/{record_id}``, else
      ``unmatched``; method = a known HTTP method, else ``other``: closed sets, so requests
      with made-up methods or paths add no series).
    * database unavailable (:func:`pinlog.db.engine.is_database_unavailable`) → ``503``
      ``{"error": "DATABASE_UNAVAILABLE", …}`` with ``Retry-After``; logged at WARNING.
    * any other exception → ``500`` ``{"error": "INTERNAL", …}``; logged at ERROR with the
      traceback (redacted by :mod:`pinlog.logs`).

    Log lines carry ``method``, ``path``, ``request_id`` (the ``X-Request-Id`` header, or a new
    one that is also returned) — never a body. A response already started cannot be replaced:
    the error is logged and the connection ends.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        raw_id = headers.get(REQUEST_ID_HEADER.lower().encode(), b"")
        request_id = raw_id.decode("latin-1")[:64] or uuid.uuid4().hex
        state = {"status": 500, "started": False}

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        with log_context(request_id=request_id):  # the request's edge: all its lines carry it
            try:
                await self.app(scope, receive, send_wrapper)
            except Exception as exc:  # noqa: BLE001 - every escaped error gets an answer
                extra = {"method": scope.get("method"), "path": scope.get("path"),
                         "error_class": type(exc).__name__}
                if is_database_unavailable(exc):
                    status, body = 503, DB_UNAVAILABLE_BODY
                    log.warning("database unavailable: answered 503", extra=extra)
                else:
                    status, body = 500, INTERNAL_BODY
                    log.error("unhandled error", exc_info=True, extra=extra)
                if state["started"]:
                    raise
                response = JSONResponse(body, status_code=status, headers={
                    REQUEST_ID_HEADER: request_id,
                    **({"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else {})})
                await response(scope, receive, send_wrapper)
            finally:
                route = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
                method = method_label(scope.get("method"))
                m.HTTP_REQUESTS.labels(route=route, method=method,
                                       status=str(state["status"])).inc()
                m.HTTP_LATENCY.labels(route=route, method=method).observe(
                    time.perf_counter() - started)


def startup_fields(config: Config, components: tuple[str, ...], url: str) -> dict[str, str]:
    """The fields of the one start-up log line: components, embedding profile, database
    (redacted: no password), rescan settings. Never a secret."""
    r = config.core.rescan
    rescan = (f"enabled interval={r.interval.total_seconds():g}s "
              f"pending_expiry={r.pending_expiry.total_seconds():g}s "
              f"processing_expiry={r.processing_expiry.total_seconds():g}s "
              f"max_retries={r.max_retries} batch={r.batch_size}"
              if r.enabled and "core" in components else "off")
    return {"components": ",".join(components), "profile": config.profile,
            "database": ("embedded " if config.settings.embedded else "") + redacted_url(url),
            "rescan": rescan}


@dataclass(frozen=True)
class Started:
    """The running components of a server: its engine, the database URL, the runtimes and its
    process registry (its id is the owner its claims record, SPEC §7.3.1)."""

    engine: AsyncEngine
    url: str
    components: tuple[Component, ...]
    running: Components
    registry: ProcessRegistry


@asynccontextmanager
async def started_components(config: Config, components: tuple[Component, ...], url: str, *,
                             ai_kwargs: dict[str, Any] | None = None,
                             core_kwargs: dict[str, Any] | None = None) -> AsyncIterator[Started]:
    """Open an engine on ``url``, record this process (:class:`ProcessRegistry`: rule-relevant
    settings, heartbeat lease) and start ``components`` (the rescan loop per
    ``PINLOG_RESCAN_ENABLED``) with the registry's id as the owner of their claims; on exit stop
    them, THEN end the lease — so what they leave (queued jobs dropped, stages cancelled at the
    end of the grace) is released to every live process's rescan at once (SPEC §7.3.1) — and
    dispose of the engine.

    Raises:
        whatever a runtime's ``start()`` raises (``StartupError``: ai tables missing, no
        presets, a dimension mismatch).
    """
    engine = create_engine(url, pool_size=config.settings.db_pool_size)
    # issue 16 #7: record the rule-relevant settings; ERROR when a live replica runs with
    # other values (never refuses to start)
    registry = ProcessRegistry(engine, replica_rules(config, components), components,
                               lease=config.settings.heartbeat_timeout)
    try:
        await registry.start()
        try:
            async with running_components(config, engine, ai="ai" in components,
                                          core="core" in components, ai_kwargs=ai_kwargs,
                                          core_kwargs=core_kwargs,
                                          owner=registry.process_id) as running:
                yield Started(engine, url, components, running, registry)
        finally:
            await registry.stop()
    finally:
        await engine.dispose()


def create_app(
    settings: Settings | Config | None = None,
    *,
    components: tuple[Component, ...] = ("core", "ai"),
    database_url: str | None = None,
    ai_kwargs: dict[str, Any] | None = None,
    core_kwargs: dict[str, Any] | None = None,
    started: Started | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings: the settings, or the configuration built from them (the CLI's); defaults to
            :func:`pinlog.settings.get_settings`.
        components: which components this process runs (``core``, ``ai`` or both).
        database_url: libpq URL overriding the configured/embedded database (tests).
        ai_kwargs, core_kwargs: extra runtime arguments (tests pass fake model providers).
        started: components already running (:func:`started_components`); the lifespan then
            neither starts nor stops them (``components``/``database_url`` come from it).

    Raises:
        SettingsError: an unknown embedding provider or judge (building the configuration).
    """
    config = settings if isinstance(settings, Config) else build_config(settings or get_settings())
    if started is not None:
        components = started.components

    @asynccontextmanager
    async def serving(running: Started) -> AsyncIterator[None]:
        app.state.config = config
        app.state.engine = running.engine
        app.state.ai = running.running.ai
        app.state.core = running.running.core
        log.info("pinlog started", extra=startup_fields(config, components, running.url))
        try:
            yield
        finally:
            # the console's long actions end while the engine they use is still open
            actions = getattr(app.state, "console_actions", None)
            if actions is not None:
                await actions.stop()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if started is not None:
            async with serving(started):
                yield
            return
        url = database_url or resolve_database_url(config.settings)
        async with started_components(config, components, url, ai_kwargs=ai_kwargs,
                                      core_kwargs=core_kwargs) as running, serving(running):
            yield

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
            version = await database_revision(app.state.engine)
        except Exception:  # noqa: BLE001 - any failure means not ready
            return JSONResponse(NOT_READY_BODY, status_code=503)
        if version != head():
            return JSONResponse(NOT_READY_BODY, status_code=503)
        for name in ("ai", "core"):
            runtime = getattr(app.state, name, None)
            if runtime is not None and not await runtime.ready():
                return JSONResponse(NOT_READY_BODY, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def metrics() -> Response:
        """Prometheus metrics. Always answers: the database-derived gauges are refreshed
        within :data:`METRICS_DB_TIMEOUT`; when that read fails they keep their last values
        and ``pinlog_db_up`` is 0 (``pinlog_db_last_read_timestamp_seconds`` says how old)."""
        core = getattr(app.state, "core", None)
        try:
            if core is not None:
                async with asyncio.timeout(METRICS_DB_TIMEOUT):
                    await core.refresh_gauges()
            else:
                async with asyncio.timeout(METRICS_DB_TIMEOUT):
                    await ping(app.state.engine)
        except Exception as exc:  # noqa: BLE001 - monitoring must not go blind
            m.DB_UP.set(0)
            log.warning("metrics: database read failed; serving the last values",
                        extra={"error_class": type(exc).__name__})
        else:
            m.DB_UP.set(1)
            m.DB_LAST_READ.set(time.time())
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    if "ai" in components:
        from pinlog.ai.api import router as ai_router
        from pinlog.ai.search_api import router as ai_search_router

        app.include_router(ai_router)
        app.include_router(ai_search_router)
    if "core" in components:
        from pinlog.console import mount as mount_console
        from pinlog.core.api import router as core_router

        app.include_router(core_router)
        mount_console(app, config.settings)  # /console, only when a console token is set (issue 29)
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limits=body_limits(config.settings))
    app.add_middleware(RequestGuard)  # outermost: counts the 413s too
    return app
