"""core commands: ``pinlog members create``, ``pinlog token``, ``pinlog search``, ``pinlog import``.

Output is the value alone on stdout (scripts capture it); errors go to stderr with exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from pinlog.cli_support import exit_with_error, run_with_engine, settings_or_exit
from pinlog.core.importing import print_import_outcome, run_import

members_app = typer.Typer(help="Members (the people whose records and contexts these are).",
                          no_args_is_help=True)


@members_app.command("create")
def members_create(
    external_ref: str | None = typer.Option(
        None, "--external-ref", help="Key of an upstream identity system (unique among active members)."),
) -> None:
    """Create a member and print its id alone on stdout."""
    from pinlog.core.services import CoreError, CoreService

    settings = settings_or_exit()

    async def work(engine):  # type: ignore[no-untyped-def]
        return await CoreService(engine, None, settings).create_member(external_ref)

    try:
        member_id = run_with_engine(settings, work)
    except CoreError as exc:
        exit_with_error(exc.message)
    typer.echo(member_id)


def token(
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
) -> None:
    """Print a member token (JWT, valid for PINLOG_JWT_TTL) alone on stdout."""
    from pinlog.core.api.auth import issue_token
    from pinlog.core.services import CoreError, CoreService

    settings = settings_or_exit()

    async def work(engine):  # type: ignore[no-untyped-def]
        return await CoreService(engine, None, settings).resolve_member(member)

    try:
        member_id = run_with_engine(settings, work)
    except CoreError as exc:
        exit_with_error(exc.message)
    typer.echo(issue_token(settings, member_id))


#: Same cap as ``POST /v1/search`` (characters).
SEARCH_QUERY_MAX_CHARS = 500


def search(
    query: str = typer.Argument(..., help="What you remember about the place, in your words."),
    member: str = typer.Option(..., "--member", help="Member id or external ref."),
    limit: int = typer.Option(10, "--limit", min=1, max=100, help="Most records to show."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Search a member's records by meaning (SPEC §10), as the member would through /v1/search.

    Runs the ai side in this process unless PINLOG_AI_BASE_URL points at a running one.
    """
    import json

    from rich.console import Console
    from rich.table import Table

    from pinlog.composition import running_components
    from pinlog.core.search import SearchRejected, SearchUnavailable, member_search
    from pinlog.core.services import CoreError, CoreService

    settings = settings_or_exit().model_copy(update={"rescan_enabled": False})
    if not query.strip() or len(query) > SEARCH_QUERY_MAX_CHARS:
        exit_with_error(f"the query must be 1..{SEARCH_QUERY_MAX_CHARS} characters, not blank", 2)

    async def work(engine):  # type: ignore[no-untyped-def]
        member_id = await CoreService(engine, None, settings).resolve_member(member)
        async with running_components(settings, engine, ai=settings.ai_base_url is None) as parts:
            return await member_search(engine, settings, parts.core.search_client,
                                       member_id, query, limit)

    try:
        results = run_with_engine(settings, work)
    except CoreError as exc:
        exit_with_error(exc.message)
    except (SearchUnavailable, SearchRejected, RuntimeError) as exc:
        exit_with_error(f"search failed: {exc}")
    if as_json:
        typer.echo(json.dumps({"results": [{
            "recordId": r.record_id, "contextId": r.context_id, "similarity": r.similarity,
            "place": {"externalPlaceId": r.place.external_place_id, "name": r.place.name,
                      "address": r.place.address, "lat": r.place.lat, "lng": r.place.lng},
            "text": r.text, "keywords": r.keywords} for r in results]}, ensure_ascii=False))
        return
    table = Table(title=f"{len(results)} result(s)")
    for column in ("#", "similarity", "record", "place", "matched note", "keywords"):
        table.add_column(column)
    for rank, r in enumerate(results, start=1):
        table.add_row(str(rank), f"{r.similarity:.3f}", str(r.record_id), r.place.name,
                      r.text if len(r.text) <= 60 else r.text[:59] + "…", ", ".join(r.keywords))
    Console().print(table)


def import_file(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                help="JSONL place notes (see README: import format)."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the AI stages finish."),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait at most."),
    as_json: bool = typer.Option(False, "--json", help="End with one JSON summary line."),
) -> None:
    """Import members, records and contexts from a JSONL file through the core services.

    Re-importing the same file does not duplicate records (member + external place id).
    Malformed lines are reported with their line numbers and skipped. When the ai side runs in
    this process (no PINLOG_AI_BASE_URL), the command always waits for the work it dispatched.
    """
    from pinlog.core.importer import parse_import_file

    settings = settings_or_exit().model_copy(update={"rescan_enabled": False})
    parsed = parse_import_file(file, max_text_chars=settings.max_text_chars)
    console = Console(stderr=as_json)
    outcome = run_with_engine(settings, lambda engine: run_import(
        engine, settings, parsed, wait=wait or settings.ai_base_url is None, timeout=timeout,
        console=console))
    print_import_outcome(console, outcome)
    if as_json:
        typer.echo(json.dumps(outcome.as_json()))
    if outcome.report.errors or (outcome.waited and not outcome.summary.all_completed):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``members create``, ``token``, ``search`` and ``import`` to the ``pinlog`` app."""
    app.add_typer(members_app, name="members")
    app.command("token")(token)
    app.command("search")(search)
    app.command("import")(import_file)
