"""``pinlog migrate`` and ``pinlog db url|start|stop|status``: the database in use."""

from __future__ import annotations

import typer

from pinlog.cli.app import (
    app,
    command_log_context,
    config_or_exit,
    database_url_or_exit,
    err_console,
    exit_with_error,
    database_settings_or_exit,
)
from pinlog.db.engine import embedded_for, redacted_url

db_app = typer.Typer(help="The database in use (embedded server management).", no_args_is_help=True,
                     callback=command_log_context)
app.add_typer(db_app, name="db")


@app.command()
def migrate(
    adopt: bool = typer.Option(False, "--adopt", help=(
        "Adopt an existing deployment whose backend owns core and created the ai tables: add "
        "only what our ai side needs, in place, in one transaction (idempotent).")),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --adopt: print the plan only."),
) -> None:
    """Apply the database migrations (both schemas; idempotent). Our history lives in
    ai.alembic_version. With --adopt: take over an existing deployment's ai side in place.

    A table lock that is not free within PINLOG_MIGRATE_LOCK_TIMEOUT seconds (a long
    transaction holds it) rolls the attempt back, so live traffic never queues behind the
    migration for longer; it is tried again, PINLOG_MIGRATE_ATTEMPTS times in all."""
    from pinlog.db import migrate as migrations

    if dry_run and not adopt:
        exit_with_error("--dry-run goes with --adopt", 2)
    config = config_or_exit()
    url = database_url_or_exit(config.settings)
    before = migrations.current_revision(url)
    limits = migrations.MigrationConfig.from_settings(config.settings)

    def on_retry(attempt: int, attempts: int, wait: float) -> None:
        err_console.print(f"a table is busy (its lock was not free within "
                          f"{limits.lock_timeout:g} s; nothing changed): attempt {attempt + 1} "
                          f"of {attempts} in {wait:g} s", style="yellow", markup=False,
                          highlight=False, soft_wrap=True)

    if adopt:
        plan = migrations.adopt(url, config.ai.embedding.dimension, dry_run=dry_run,
                                config=limits, on_retry=on_retry)
        typer.echo(plan.render())
        if dry_run:
            typer.echo("dry run: nothing changed")
            return
    else:
        migrations.upgrade(url, config=limits, on_retry=on_retry)
    after = migrations.current_revision(url)
    typer.echo(f"schema at revision {after}" + (" (no change)" if before == after else f" (was {before or 'empty'})"))


@db_app.command("url")
def db_url() -> None:
    """Print the database URL in use, without password. With the embedded server it only
    looks: a server that is not running is one line and exit 1 (nothing is started or
    created; pinlog db start starts it)."""
    settings = database_settings_or_exit()
    if not settings.embedded:
        typer.echo(redacted_url(database_url_or_exit(settings)))
        return
    server = embedded_for(settings)
    if not server.is_running():
        exit_with_error(f"the embedded database of PINLOG_DATA_DIR ({server.data_dir}) is not "
                        "running; nothing was started (pinlog db start starts it)")
    typer.echo(redacted_url(server.url()))


@db_app.command("start")
def db_start() -> None:
    """Start the embedded server and leave it running for other commands."""
    settings = database_settings_or_exit()
    if not settings.embedded:
        exit_with_error("PINLOG_DATABASE_URL is set: there is no embedded server to start.", 2)
    from pinlog.db.engine import resolve_database_url

    url = resolve_database_url(settings, keep_running=True)
    typer.echo(f"embedded database running: {redacted_url(url)}")


@db_app.command("stop")
def db_stop(
    force: bool = typer.Option(False, "--force", help="Stop it even while pinlog processes "
                               "(a pinlog serve) use it; they lose their database."),
) -> None:
    """Stop the embedded server of PINLOG_DATA_DIR. Refused (exit 1) while other pinlog
    processes use it, naming them, unless --force."""
    settings = database_settings_or_exit()
    if not settings.embedded:
        exit_with_error("PINLOG_DATABASE_URL is set: there is no embedded server to stop.", 2)
    server = embedded_for(settings)
    users = server.users() if server.is_running() else []
    if users:
        names = ", ".join(f"pid {pid} ({what})" for pid, what in users)
        if not force:
            exit_with_error(f"the embedded database is in use by {names}: stop them first "
                            "(SIGTERM / Ctrl-C), or pinlog db stop --force; nothing was stopped")
        err_console.print(f"warning: stopping the embedded database under {names}",
                          style="yellow", markup=False, highlight=False, soft_wrap=True)
    stopped = server.stop()
    typer.echo("embedded database stopped" if stopped else "embedded database was not running")


@db_app.command("status")
def db_status() -> None:
    """Say whether the embedded server of PINLOG_DATA_DIR is running (exit 1 if not)."""
    settings = database_settings_or_exit()
    if not settings.embedded:
        typer.echo("external database configured (PINLOG_DATABASE_URL)")
        return
    server = embedded_for(settings)
    if server.is_running():
        users = server.users()
        typer.echo(f"running: {redacted_url(server.url())}"
                   + (f" (used by {', '.join(f'pid {p} ({w})' for p, w in users)})"
                      if users else ""))
    else:
        typer.echo("not running")
        raise typer.Exit(1)
