"""``pinlog search``: a member's natural-language search, as through ``POST /v1/search`` (SPEC §10).

Asks the running server for this data directory (or ``PINLOG_SERVER_URL``) when there is one
(:mod:`pinlog.cli.remote`), else runs the search in-process; both print the same JSON
(:func:`pinlog.core.api.routes.ops.search_json`) and the same table.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from pinlog.cli.app import Needs, app, ask_server, config_or_exit, exit_with_error, run_command, settings_or_exit

if TYPE_CHECKING:
    from pinlog.cli.remote import Server

#: Same cap as ``POST /v1/search`` (characters).
SEARCH_QUERY_MAX_CHARS = 500


@app.command()
def search(
    query: str = typer.Argument(..., metavar="QUERY", help="What you remember about the place, in your words."),
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
    limit: int = typer.Option(10, "--limit", min=1, max=100, help="Most records to show."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Search a member's records by meaning and by their own words, as the member would through
    /v1/search; "matched by" shows which channels matched (matchedBy of /v1/search).

    --json prints the body POST /v1/search answers. Asks the running server of this
    data directory (or PINLOG_SERVER_URL) when there is one; otherwise runs the ai side in this
    process unless PINLOG_AI_BASE_URL points at a running one.
    """
    if not query.strip() or len(query) > SEARCH_QUERY_MAX_CHARS:
        exit_with_error(f"the query must be 1..{SEARCH_QUERY_MAX_CHARS} characters, not blank", 2)
    def ask(server: Server) -> str:
        return server.search(member, query, limit)

    line = ask_server(ask, unavailable="search failed: ")
    if line is None:
        settings = settings_or_exit()
        line = ask_server(ask, settings=settings, unavailable="search failed: ")
        if line is None:
            line = _in_process(settings, member, query, limit)
    if as_json:
        typer.echo(line)
        return
    _print_table(json.loads(line))


def _in_process(settings: Any, member: str, query: str, limit: int) -> str:
    from pinlog.core.api.routes.ops import search_json

    config = config_or_exit(settings=settings)

    async def work(needs: Needs) -> str:
        member_id = await needs.service.resolve_member(member)
        async with needs.running() as parts:
            assert parts.core is not None
            return await search_json(needs.engine, config.core.search, parts.core.search_client,
                                     member_id, query, limit)

    return run_command(config, work)


def _print_table(body: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    results = body["results"]
    table = Table(title=f"{len(results)} result(s)")
    for column in ("#", "similarity", "matched by", "record", "place", "matched note", "keywords"):
        table.add_column(column)
    for rank, r in enumerate(results, start=1):
        text = r["text"]
        table.add_row(str(rank), f"{r['similarity']:.3f}", "+".join(r["matchedBy"]), str(r["recordId"]),
                      r["place"]["name"], text if len(text) <= 60 else text[:59] + "…",
                      ", ".join(r["keywords"]))
    Console().print(table)
