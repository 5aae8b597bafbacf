"""The root ``pinlog`` typer app and what every command shares (SPEC §1).

Each command group lives in its own module of :mod:`pinlog.cli` and registers itself on
:data:`app` with ``@app.command()`` (or ``app.add_typer(group)`` for a sub-group) when imported;
:mod:`pinlog.cli` imports them all. Commands build their settings with :func:`settings_or_exit`
and run their work against a fresh engine with :func:`run_with_engine`; failures are reported
with :func:`exit_with_error`. Command output goes to stdout; logs go to stderr as JSON lines.

Errors (:class:`pinlog.errors.PinlogError` and the database errors operators cause) are turned
into one line and an exit code in one place, :func:`describe_error`, called by :func:`main`;
commands do not catch them.
"""

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
from pinlog.settings import Settings, SettingsError, load_settings, unknown_variables_warning

T = TypeVar("T")
err_console = Console(stderr=True)

app = typer.Typer(
    name="pinlog", help="PinLog AI: reliable embeddings and keywords for place notes.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
)


def _print_version(value: bool) -> None:
    if value:
        from pinlog import __version__

        typer.echo(f"pinlog {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """PinLog AI: reliable embeddings and keywords for place notes."""


def exit_with_error(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` to stderr in red, as plain text (no rich markup: messages may contain
    brackets; never wrapped), then leave the command with exit ``code`` (typer.Exit).

    The one way a command reports a failure: the message must already be secret-free.
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
    warning = unknown_variables_warning()
    if warning:
        err_console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
    explicit = "log_level" in settings.model_fields_set
    configure_logging(settings.log_level if service or explicit else "WARNING")
    return settings


def without_rescan(settings: Settings) -> Settings:
    """``settings`` with the rescan loop switched off: a one-shot command that runs a core
    runtime in this process runs only its own rounds (SPEC §7)."""
    return settings.model_copy(update={"rescan_enabled": False})


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


def describe_error(exc: BaseException) -> tuple[str, int] | None:
    """The CLI's one map from an error to ``(one-line message, exit code)``; None for a real
    bug (then the traceback is shown). Never includes the database URL or any secret.

    Exit 2: the operator must change something first (settings, ``pinlog migrate``, presets,
    a preset file, the database URL). Exit 1: the command ran and failed (not found, already
    exists, the model or the search failed, reprocessing impossible).
    """
    from sqlalchemy import exc as sa_exc

    from pinlog.ai.errors import ModelError
    from pinlog.ai.presets import PresetFileError
    from pinlog.core.search import SearchRejected, SearchUnavailable
    from pinlog.db.migrate import AdoptionRequired, NothingToAdopt
    from pinlog.errors import PinlogError, StartupError

    if isinstance(exc, (StartupError, SettingsError, PresetFileError, AdoptionRequired,
                        NothingToAdopt)):
        return str(exc), 2
    if isinstance(exc, ModelError):
        return f"embedding failed: {exc}", 1
    if isinstance(exc, (SearchUnavailable, SearchRejected)):
        return f"search failed: {exc}", 1
    if isinstance(exc, PinlogError):  # CoreError, ReprocessError, EmbeddedDatabaseError …
        return exc.message, 1
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if isinstance(exc, sa_exc.ProgrammingError) and sqlstate in ("42P01", "3F000"):
        return "the database schema is missing: run `pinlog migrate` first", 2
    if sqlstate == "42501":  # insufficient_privilege: say which, never the statement's values
        problem = str(getattr(exc, "orig", exc)).splitlines()[0]
        return (f"the database role lacks a privilege ({problem}): migrations need a role that "
                "owns the ai schema's tables; serving needs USAGE and read/write on them"), 2
    if sqlstate == "55P03":  # lock_not_available (lock_timeout)
        return ("a table is busy (another session holds a lock on it); nothing was changed: "
                "run the command again when the other transaction has ended"), 1
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return ("cannot connect to the database: check PINLOG_DATABASE_URL (or the embedded "
                "server of PINLOG_DATA_DIR)"), 2
    if isinstance(exc, sa_exc.ArgumentError):
        return "PINLOG_DATABASE_URL is not a valid database URL", 2
    return None


def friendly_error(exc: BaseException) -> str | None:
    """The message of :func:`describe_error`, or None for a real bug."""
    described = describe_error(exc)
    return described[0] if described else None


def main() -> None:
    """Console-script entry point: known errors get one clear line (:func:`describe_error`)
    and their exit code; anything else is re-raised with its traceback."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - everything else is re-raised
        described = describe_error(exc)
        if described is None:
            raise
        message, code = described
        err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(code) from None
