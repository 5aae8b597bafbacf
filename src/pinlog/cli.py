"""The ``pinlog`` command: thin typer commands that call services (SPEC §1).

Component commands are registered from ``pinlog.ai.commands`` and ``pinlog.core.commands``.
Command output goes to stdout; logs go to stderr as JSON lines.
"""

from __future__ import annotations

import signal
from pathlib import Path

import typer

from pinlog.cli_support import (
    database_url_or_exit,
    err_console,
    exit_with_error,
    settings_or_exit,
)
from pinlog.db.engine import embedded_for, redacted_url

app = typer.Typer(
    name="pinlog", help="PinLog AI: reliable embeddings and keywords for place notes.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
)
db_app = typer.Typer(help="The database in use (embedded server management).", no_args_is_help=True)
app.add_typer(db_app, name="db")


@app.command()
def migrate() -> None:
    """Apply the database migrations (both schemas; idempotent)."""
    from pinlog.db import migrate as migrations

    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    before = migrations.current_revision(url)
    migrations.upgrade(url)
    after = migrations.current_revision(url)
    typer.echo(f"schema at revision {after}" + (" (no change)" if before == after else f" (was {before or 'empty'})"))


@app.command()
def serve(
    components: str = typer.Option("core,ai", help="Components to run: core, ai or core,ai."),
) -> None:
    """Run the HTTP server (uvicorn) with the rescan loop; stops the embedded DB it started."""
    import uvicorn

    from pinlog.app import create_app

    settings = settings_or_exit(service=True)
    wanted = tuple(c.strip() for c in components.split(",") if c.strip())
    if not wanted or any(c not in ("core", "ai") for c in wanted):
        exit_with_error("--components must be core, ai or core,ai", 2)
    url = database_url_or_exit(settings)
    _preflight(settings, url, wanted)
    app_ = create_app(settings, components=wanted, database_url=url)  # type: ignore[arg-type]

    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown; turn that into a normal
    # exit so the embedded database this process started is stopped (atexit does not run on
    # a signal's default action).
    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)
    uvicorn.run(app_, host=settings.host, port=settings.port, log_config=None,
                log_level=settings.log_level.lower())


def _preflight(settings: object, url: str, components: tuple[str, ...]) -> None:
    """Fail before uvicorn starts — one clear line instead of a lifespan traceback — when a
    component would refuse to start (the ai side without its tables or presets). A core-only
    server may start on a database that is not migrated yet: ``/ready`` answers 503 until it is.
    """
    if "ai" not in components:
        return
    import asyncio

    from pinlog.composition import running_components
    from pinlog.db.engine import create_engine

    async def check() -> None:
        engine = create_engine(url, pool_size=2)
        quiet = settings.model_copy(update={"rescan_enabled": False})  # type: ignore[attr-defined]
        try:
            async with running_components(quiet, engine, ai=True, core=False):
                pass
        finally:
            await engine.dispose()

    asyncio.run(check())


@db_app.command("url")
def db_url() -> None:
    """Print the database URL in use, without password."""
    settings = settings_or_exit()
    typer.echo(redacted_url(database_url_or_exit(settings)))


@db_app.command("start")
def db_start() -> None:
    """Start the embedded server and leave it running for other commands."""
    settings = settings_or_exit()
    if not settings.embedded:
        exit_with_error("PINLOG_DATABASE_URL is set: there is no embedded server to start.", 2)
    from pinlog.db.engine import resolve_database_url

    url = resolve_database_url(settings, keep_running=True)
    typer.echo(f"embedded database running: {redacted_url(url)}")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server of PINLOG_DATA_DIR."""
    settings = settings_or_exit()
    stopped = embedded_for(settings).stop()
    typer.echo("embedded database stopped" if stopped else "embedded database was not running")


@db_app.command("status")
def db_status() -> None:
    """Say whether the embedded server of PINLOG_DATA_DIR is running (exit 1 if not)."""
    settings = settings_or_exit()
    if not settings.embedded:
        typer.echo("external database configured (PINLOG_DATABASE_URL)")
        return
    server = embedded_for(settings)
    if server.is_running():
        typer.echo(f"running: {redacted_url(server.url())}")
    else:
        typer.echo("not running")
        raise typer.Exit(1)


@app.command()
def demo(
    data: Path | None = typer.Option(
        None, "--data", exists=True, file_okay=False,
        help="Directory with place_notes.jsonl, presets_ko.yaml, search_queries.jsonl "
             "(default: the sample shipped in the package)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Embedded database directory (default: a fresh temporary one)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary data directory."),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait for the AI."),
    as_json: bool = typer.Option(False, "--json", help="End with one JSON summary line."),
) -> None:
    """Run the whole job on a fresh embedded database: migrate, load presets, import place
    notes, process both AI stages, show records with keywords, run searches.

    Uses the sample notes shipped in the package, or the real data set with --data.
    Exit code 1 if any context does not end COMPLETED on both stages."""
    from pinlog.demo import demo_command
    from pinlog.logs import configure_logging

    configure_logging("WARNING")
    try:
        code = demo_command(data, data_dir, keep, timeout, as_json)
    except FileNotFoundError as exc:
        exit_with_error(str(exc), 2)
    raise typer.Exit(code)


def _register_components() -> None:
    from pinlog.ai import commands as ai_commands
    from pinlog.core import commands as core_commands
    from pinlog.core import ops_commands

    ai_commands.register(app)
    core_commands.register(app)
    ops_commands.register(app)


_register_components()


def friendly_error(exc: BaseException) -> str | None:
    """A one-line message for the mistakes operators make (not migrated, database unreachable,
    component refused to start), or None for a real bug (then the traceback is shown).
    Never includes the database URL or any secret."""
    from sqlalchemy import exc as sa_exc

    from pinlog.errors import StartupError

    if isinstance(exc, StartupError):
        return str(exc)
    if isinstance(exc, sa_exc.ProgrammingError) and \
            getattr(getattr(exc, "orig", None), "sqlstate", None) in ("42P01", "3F000"):
        return "the database schema is missing: run `pinlog migrate` first"
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return ("cannot connect to the database: check PINLOG_DATABASE_URL (or the embedded "
                "server of PINLOG_DATA_DIR)")
    if isinstance(exc, sa_exc.ArgumentError):
        return "PINLOG_DATABASE_URL is not a valid database URL"
    return None


def main() -> None:
    """Console-script entry point: operator mistakes get one clear line and exit 2."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - everything else is re-raised
        message = friendly_error(exc)
        if message is None:
            raise
        err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
