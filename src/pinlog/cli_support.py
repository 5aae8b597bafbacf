"""Helpers shared by the thin typer commands: settings errors, engines, event loops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import typer
from rich.console import Console
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.db.embedded import EmbeddedDatabaseError
from pinlog.db.engine import create_engine, resolve_database_url
from pinlog.logs import configure_logging
from pinlog.settings import Settings, SettingsError, load_settings

T = TypeVar("T")
err_console = Console(stderr=True)


def exit_with_error(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` to stderr in red, as plain text (no rich markup: messages may contain
    brackets; never wrapped), then leave the command with exit ``code`` (typer.Exit).

    The one way a thin command reports a failure: the message must already be secret-free.
    """
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None


def settings_or_exit(*, service: bool = False) -> Settings:
    """Load settings; on error print the (secret-free) message and exit 2.

    Logging: a long-running service logs at ``PINLOG_LOG_LEVEL`` (default INFO); one-shot
    commands log warnings and errors only, unless ``PINLOG_LOG_LEVEL`` is set explicitly, so
    their stderr is not mixed with routine INFO lines.
    """
    try:
        settings = load_settings()
    except SettingsError as exc:
        exit_with_error(str(exc), 2)
    explicit = "log_level" in settings.model_fields_set
    configure_logging(settings.log_level if service or explicit else "WARNING")
    return settings


def database_url_or_exit(settings: Settings) -> str:
    """Resolve the database URL (starting/joining the embedded server); exit 1 on failure."""
    try:
        return resolve_database_url(settings)
    except EmbeddedDatabaseError as exc:
        exit_with_error(str(exc))


def run_with_engine(settings: Settings, work: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``work(engine)`` in a fresh event loop against the configured database."""
    url = database_url_or_exit(settings)

    async def main() -> T:
        engine = create_engine(url, pool_size=settings.db_pool_size)
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())
