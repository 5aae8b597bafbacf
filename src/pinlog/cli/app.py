"""The root ``pinlog`` typer app and what every command shares (SPEC §1).

Each command group lives in its own module of :mod:`pinlog.cli` and registers itself on
:data:`app` with ``@app.command()`` (or ``app.add_typer(group)`` for a sub-group) when imported;
:mod:`pinlog.cli` imports them all.

One way for a command to get what it needs: :func:`config_or_exit` loads the settings and
builds the configuration once (exit 2 on a bad setting); :func:`run_command` runs the command's
``work(needs)`` in a fresh event loop, where :class:`Needs` gives the engine, core's services
(``needs.service``, dispatching nothing) and, on request, the running components
(``async with needs.running() as parts``: core, and the ai side in this process unless
``PINLOG_AI_BASE_URL``) — one-shot by default, i.e. without the rescan loop. Failures are
reported with :func:`exit_with_error`. Command output goes to stdout; logs go to stderr as JSON
lines, each carrying the ``command`` that runs (:func:`command_log_context`, the root's and each
group's callback).

Errors (:class:`pinlog.errors.PinlogError` and the database errors operators cause) are turned
into one line and an exit code in one place, :func:`describe_error`, called by :func:`main`;
commands do not catch them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from pinlog.logs import log_context

if TYPE_CHECKING:  # imported where used: `pinlog search` asking a running server loads none of them
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pinlog.settings import Settings

    from pinlog.cli.remote import Server
    from pinlog.composition import Components, Config
    from pinlog.core.services import CoreService

T = TypeVar("T")
err_console = Console(stderr=True)

app = typer.Typer(
    name="pinlog", help="PinLog AI: reliable embeddings and keywords for place notes.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from pinlog import __version__

        typer.echo(f"pinlog {__version__}")
        raise typer.Exit()


def _command_words(ctx: Any) -> list[str]:
    """Names from the root's child down to ``ctx`` (a click context); the root's own name is
    the program's (``pinlog``, ``python -m pinlog``) and is left out."""
    return [] if ctx.parent is None else [*_command_words(ctx.parent), str(ctx.info_name)]


def command_log_context(ctx: typer.Context) -> None:
    """The CLI command's edge of the logging context (:mod:`pinlog.logs`): until the command
    ends, every line logged carries ``command``, its path without the program name
    (``rescan``, ``presets load``). Called by the root's callback and each group's
    (``typer.Typer(callback=command_log_context)``); the command's context closes it."""
    if ctx.invoked_subcommand is None:
        return
    scope = ExitStack()
    scope.enter_context(log_context(command=" ".join([*_command_words(ctx),
                                                     ctx.invoked_subcommand])))
    ctx.call_on_close(scope.close)


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """PinLog AI: reliable embeddings and keywords for place notes."""
    command_log_context(ctx)


def exit_with_error(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` to stderr in red, as plain text (no rich markup: messages may contain
    brackets; never wrapped), then leave the command with exit ``code`` (typer.Exit).

    The one way a command reports a failure: the message must already be secret-free.
    """
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code) from None


def settings_or_exit(**overrides: object) -> Settings:
    """Load the settings only (no component config: what a command asking a running server
    needs); on error print the (secret-free) message and exit 2."""
    from pinlog.settings import SettingsError, load_settings

    try:
        return load_settings(**overrides)
    except SettingsError as exc:
        exit_with_error(str(exc), 2)


def config_or_exit(*, service: bool = False, settings: Settings | None = None,
                   **overrides: object) -> Config:
    """Load the settings (``overrides`` win over the environment: a command's options; or take
    ``settings`` already loaded) and build the configuration
    (:func:`pinlog.composition.build_config`); on error print the (secret-free) message and
    exit 2.

    Logging: a long-running service logs at ``PINLOG_LOG_LEVEL`` (default INFO); one-shot
    commands log warnings and errors only, unless ``PINLOG_LOG_LEVEL`` is set explicitly, so
    their stderr is not mixed with routine INFO lines.
    """
    from pinlog.composition import build_config
    from pinlog.logs import configure_logging
    from pinlog.settings import SettingsError, load_settings, unknown_variables_warning

    try:
        config = build_config(settings if settings is not None else load_settings(**overrides))
    except SettingsError as exc:
        exit_with_error(str(exc), 2)
    warning = unknown_variables_warning()
    if warning:
        err_console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
    settings = config.settings
    explicit = "log_level" in settings.model_fields_set
    configure_logging(settings.log_level if service or explicit else "WARNING")
    return config


def database_settings_or_exit() -> Settings:
    """The settings of a command that only looks at the database (``pinlog db …``): loaded
    without generating secrets or creating the data dir; exit 2 on a bad setting."""
    from pinlog.logs import configure_logging
    from pinlog.settings import SettingsError, load_database_settings, unknown_variables_warning

    try:
        settings = load_database_settings()
    except SettingsError as exc:
        exit_with_error(str(exc), 2)
    warning = unknown_variables_warning()
    if warning:
        err_console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
    configure_logging(settings.log_level if "log_level" in settings.model_fields_set else "WARNING")
    return settings


def ask_server(call: Callable[[Server], T], *, settings: Settings | None = None,
               unavailable: str = "") -> T | None:
    """``call(server)`` on the running server, or None when there is none (the command then
    works in-process). Without ``settings`` (a command's first try, loading nothing heavy): the
    server recorded for this data directory (:func:`pinlog.cli.remote.recorded_server`); with
    them: ``PINLOG_SERVER_URL`` or the recorded one (:func:`pinlog.cli.remote.find_server`).

    Errors the server answers become one line and an exit code, as the in-process path reports
    them: 401 → exit 2 (the secret is not the server's); another 4xx → its message, exit 1;
    503 → ``unavailable`` + its message, exit 1. A recorded server that stopped answering →
    None; ``PINLOG_SERVER_URL`` unreachable → exit 1.
    """
    from pinlog.cli.remote import ServerError, Unreachable, find_server, recorded_server

    server = recorded_server() if settings is None else find_server(settings)
    if server is None:
        return None
    try:
        return call(server)
    except Unreachable as exc:
        if not server.explicit:
            return None
        exit_with_error(f"cannot reach PINLOG_SERVER_URL ({exc})", 1)
    except ServerError as exc:
        if exc.status == 401:
            exit_with_error(f"the server at {server.url} did not accept this command's internal "
                            "secret: set the same PINLOG_INTERNAL_SECRETS (or PINLOG_DATA_DIR) "
                            "as the server", 2)
        prefix = unavailable if exc.status >= 500 else ""
        exit_with_error(f"{prefix}{exc.message}", 1)


def database_url_or_exit(settings: Settings) -> str:
    """Resolve the database URL (starting/joining the embedded server); exit 1 on failure."""
    from pinlog.db.embedded import EmbeddedDatabaseError
    from pinlog.db.engine import resolve_database_url

    try:
        return resolve_database_url(settings)
    except EmbeddedDatabaseError as exc:
        exit_with_error(str(exc))


@dataclass
class Needs:
    """What a command may ask for, inside :func:`run_command`.

    Attributes:
        config: the process's configuration.
        engine: an engine on the configured database.
    """

    config: Config
    engine: AsyncEngine

    @cached_property
    def service(self) -> CoreService:
        """core's services without a dispatcher: what they create stays PENDING until a rescan
        sends it (commands that only read or create members/tokens)."""
        from pinlog.core.services import CoreService

        return CoreService(self.engine, None, self.config.core.service)

    @asynccontextmanager
    async def running(self, *, one_shot: bool = True) -> AsyncIterator[Components]:
        """core running (``parts.core``: dispatcher, process client, search client) and the ai
        side in this process unless ``PINLOG_AI_BASE_URL`` points at one (``parts.ai``, else
        None); stopped on exit. ``one_shot`` (the default): no rescan loop and no retention
        loop, so a command runs only its own rounds (SPEC §7); False: as
        ``PINLOG_RESCAN_ENABLED`` and ``PINLOG_RETENTION_ENABLED`` say.

        Raises:
            StartupError: the in-process ai side refused to start (tables missing, no presets).
        """
        from pinlog.composition import running_components

        in_process = self.config.core.dispatch.ai_base_url is None
        async with running_components(self.config, self.engine, ai=in_process,
                                      rescan=False if one_shot else None,
                                      retention=False if one_shot else None) as parts:
            yield parts


def run_command(config: Config, work: Callable[[Needs], Awaitable[T]]) -> T:
    """Run ``work(needs)`` in a fresh event loop against the configured database (started or
    joined when embedded; exit 1 when that fails); the engine is disposed of afterwards."""
    import asyncio

    from pinlog.db.engine import create_engine

    url = database_url_or_exit(config.settings)

    async def main() -> T:
        engine = create_engine(url, pool_size=config.settings.db_pool_size)
        try:
            return await work(Needs(config, engine))
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
    from pinlog.settings import SettingsError

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
