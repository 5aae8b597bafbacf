"""``pinlog members create`` and ``pinlog token``: members and their tokens.

Output is the value alone on stdout (scripts capture it); errors go to stderr with exit 1.
"""

from __future__ import annotations

import typer
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.cli.app import app, run_with_engine, settings_or_exit

members_app = typer.Typer(help="Members (the people whose records and contexts these are).",
                          no_args_is_help=True)
app.add_typer(members_app, name="members")


@members_app.command("create")
def members_create(
    external_ref: str | None = typer.Option(
        None, "--external-ref", help="Key of an upstream identity system (unique among active members)."),
) -> None:
    """Create a member and print its id alone on stdout."""
    from pinlog.core.services import CoreService

    settings = settings_or_exit()

    async def work(engine: AsyncEngine) -> int:
        return await CoreService(engine, None, settings).create_member(external_ref)

    member_id = run_with_engine(settings, work)
    typer.echo(member_id)


@app.command()
def token(
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
) -> None:
    """Print a member token (JWT, valid for PINLOG_JWT_TTL) alone on stdout."""
    from pinlog.core.api.auth import issue_token
    from pinlog.core.services import CoreService

    settings = settings_or_exit()

    async def work(engine: AsyncEngine) -> int:
        return await CoreService(engine, None, settings).resolve_member(member)

    member_id = run_with_engine(settings, work)
    typer.echo(issue_token(settings, member_id))
