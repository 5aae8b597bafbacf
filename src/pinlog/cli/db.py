"""``pinlog migrate`` and ``pinlog db url|start|stop|status``: the database in use."""

from __future__ import annotations

import typer

from pinlog.cli.app import app, command_log_context, config_or_exit, database_url_or_exit, exit_with_error
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
    ai.alembic_version. With --adopt: take over an existing deployment's ai side in place."""
    from pinlog.db import migrate as migrations

    if dry_run and not adopt:
        exit_with_error("--dry-run goes with --adopt", 2)
    config = config_or_exit()
    url = database_url_or_exit(config.settings)
    before = migrations.current_revision(url)
    if adopt:
        plan = migrations.adopt(url, config.ai.embedding.dimension, dry_run=dry_run)
        typer.echo(plan.render())
        if dry_run:
            typer.echo("dry run: nothing changed")
            return
    else:
        migrations.upgrade(url)
    after = migrations.current_revision(url)
    typer.echo(f"schema at revision {after}" + (" (no change)" if before == after else f" (was {before or 'empty'})"))


@db_app.command("url")
def db_url() -> None:
    """Print the database URL in use, without password."""
    settings = config_or_exit().settings
    typer.echo(redacted_url(database_url_or_exit(settings)))


@db_app.command("start")
def db_start() -> None:
    """Start the embedded server and leave it running for other commands."""
    settings = config_or_exit().settings
    if not settings.embedded:
        exit_with_error("PINLOG_DATABASE_URL is set: there is no embedded server to start.", 2)
    from pinlog.db.engine import resolve_database_url

    url = resolve_database_url(settings, keep_running=True)
    typer.echo(f"embedded database running: {redacted_url(url)}")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server of PINLOG_DATA_DIR."""
    settings = config_or_exit().settings
    stopped = embedded_for(settings).stop()
    typer.echo("embedded database stopped" if stopped else "embedded database was not running")


@db_app.command("status")
def db_status() -> None:
    """Say whether the embedded server of PINLOG_DATA_DIR is running (exit 1 if not)."""
    settings = config_or_exit().settings
    if not settings.embedded:
        typer.echo("external database configured (PINLOG_DATABASE_URL)")
        return
    server = embedded_for(settings)
    if server.is_running():
        typer.echo(f"running: {redacted_url(server.url())}")
    else:
        typer.echo("not running")
        raise typer.Exit(1)
