"""``pinlog search``: a member's natural-language search, as through ``POST /v1/search`` (SPEC §10)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from pinlog.cli.app import Needs, app, config_or_exit, exit_with_error, run_command

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

    --json prints the body POST /v1/search answers. Runs the ai side in this process
    unless PINLOG_AI_BASE_URL points at a running one.
    """
    from pinlog.core.search import SearchResult, member_search

    config = config_or_exit()
    if not query.strip() or len(query) > SEARCH_QUERY_MAX_CHARS:
        exit_with_error(f"the query must be 1..{SEARCH_QUERY_MAX_CHARS} characters, not blank", 2)

    async def work(needs: Needs) -> list[SearchResult]:
        member_id = await needs.service.resolve_member(member)
        async with needs.running() as parts:
            assert parts.core is not None
            return await member_search(needs.engine, config.core.search,
                                       parts.core.search_client, member_id, query, limit)

    results = run_command(config, work)
    if as_json:  # the body of POST /v1/search, from the same schema
        from pinlog.core.api.routes.search import SearchOut

        body = SearchOut.of(results).model_dump(mode="json", by_alias=True)
        typer.echo(json.dumps(body, ensure_ascii=False))
        return
    table = Table(title=f"{len(results)} result(s)")
    for column in ("#", "similarity", "matched by", "record", "place", "matched note", "keywords"):
        table.add_column(column)
    for rank, r in enumerate(results, start=1):
        table.add_row(str(rank), f"{r.similarity:.3f}", "+".join(r.matched_by), str(r.record_id),
                      r.place.name, r.text if len(r.text) <= 60 else r.text[:59] + "…",
                      ", ".join(r.keywords))
    Console().print(table)
