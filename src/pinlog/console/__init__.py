"""The operator console: ``/console``, served by ``pinlog serve`` (issue 29).

Server-rendered pages (Jinja2, autoescaped) with vendored static assets (``static/``: one
stylesheet, one small script; no CDN, no build step), charts as inline SVG, and a live refresh
of the overview by polling its JSON. Off unless ``PINLOG_CONSOLE_ADMIN_TOKEN`` or
``PINLOG_CONSOLE_READ_TOKEN`` is set; see :mod:`pinlog.console.access` (login, session, CSRF)
and :mod:`pinlog.console.routes` (pages, roles, actions). It reads through
:mod:`pinlog.console.reads` (``console.sql``) and core's status, search and rescan/reprocess
functions; mounted only in a process that runs core (the pages are core's picture of the
state machine, the actions core's operations).

An entry point (like :mod:`pinlog.app`): it may import core; core and ai never import it.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from pinlog.console.access import ConsoleConfig
from pinlog.settings import Settings

__all__ = ["ConsoleConfig", "mount"]


def mount(app: FastAPI, settings: Settings) -> bool:
    """Mount the console on ``app`` when a console token is configured; returns whether it did.
    The app must run core (``app.state.core``)."""
    config = ConsoleConfig.from_settings(settings)
    if not config.enabled:
        return False
    from pinlog.console.routes import STATIC, BackgroundActions, build_router

    # stopped by the app's lifespan before its components (pinlog.app.create_app)
    app.state.console_actions = BackgroundActions()
    app.include_router(build_router(config, app.state.console_actions))
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    return True
