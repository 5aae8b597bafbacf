"""``pinlog members create``, ``pinlog token`` and ``pinlog records``: members, their tokens and
their records.

Output is the value alone on stdout (scripts capture it); errors go to stderr with exit 1.
"""

from __future__ import annotations

import typer

from pinlog.cli.app import (
    Needs,
    app,
    ask_server,
    command_log_context,
    config_or_exit,
    run_command,
    settings_or_exit,
)

members_app = typer.Typer(help="Members (the people whose records and contexts these are).",
                          no_args_is_help=True,
                          callback=command_log_context)
app.add_typer(members_app, name="members")


@members_app.command("create")
def members_create(
    external_ref: str | None = typer.Option(
        None, "--external-ref", help="Key of an upstream identity system (unique among active members)."),
) -> None:
    """Create a member and print its id alone on stdout."""
    config = config_or_exit()

    async def work(needs: Needs) -> int:
        return await needs.service.create_member(external_ref)

    typer.echo(run_command(config, work))


@app.command()
def token(
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
) -> None:
    """Print a member token (JWT, valid for PINLOG_JWT_TTL) alone on stdout."""
    from pinlog.core.api.auth import issue_token

    config = config_or_exit()

    async def work(needs: Needs) -> int:
        return await needs.service.resolve_member(member)

    typer.echo(issue_token(config.core.auth, run_command(config, work)))


@app.command()
def records(
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
    as_json: bool = typer.Option(False, "--json", help="Print the /v1/records body (JSON)."),
) -> None:
    """Show a member's records: place, keywords and the AI status of every context.

    Asks the running server of this data directory (or PINLOG_SERVER_URL) when there is one,
    otherwise reads the database in-process; both print the same JSON."""
    line = ask_server(lambda server: server.records(member))
    settings = settings_or_exit() if line is None else None
    if settings is not None:
        line = ask_server(lambda server: server.records(member), settings=settings)
    if line is None:
        from pinlog.core.api.routes.ops import records_json

        config = config_or_exit(settings=settings)

        async def work(needs: Needs) -> str:
            return await records_json(needs.service, await needs.service.resolve_member(member))

        line = run_command(config, work)
    if as_json:
        typer.echo(line)
        return
    import json

    from rich.console import Console
    from rich.table import Table

    listing = json.loads(line)["records"]
    table = Table(title=f"records of member {member}")
    for column in ("record", "place", "keywords", "context", "ai status", "context keywords"):
        table.add_column(column)
    for record in listing:
        for i, context in enumerate(record["contexts"]):
            first = i == 0
            table.add_row(str(record["recordId"]) if first else "",
                          record["place"]["name"] if first else "",
                          ", ".join(record["keywords"]) if first else "",
                          str(context["contextId"]), context["aiStatus"],
                          ", ".join(context["keywords"]) or "-")
    if not listing:
        table.add_row("-", "", "", "", "", "none")
    Console().print(table)
