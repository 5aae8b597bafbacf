"""``pinlog purge``: the retention job once, now (issue 31), or one withdrawn member's erasure.

The work is in :mod:`pinlog.db.retention` (the report, the loop), :mod:`pinlog.core.retention`
and :mod:`pinlog.ai.retention` (the parts), composed by :mod:`pinlog.composition`. Output is
counts per table only — never a note's text.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from pinlog.cli.app import Needs, app, config_or_exit, run_command
from pinlog.db.retention import PurgeReport

console = Console()


def _days(seconds: float | None) -> str:
    if seconds is None:
        return "none kept"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _print(report: PurgeReport, members: list[int] | None,
           oldest: dict[str, float | None]) -> None:
    verb = "would remove" if report.dry_run else "removed"
    title = ("erasure of member " + ", ".join(f"id:{m}" for m in members) if members is not None
             else "retention purge") + (" (--dry-run)" if report.dry_run else "")
    table = Table(title=title)
    table.add_column("table")
    table.add_column(f"rows {verb}", justify="right")
    for name, rows in report.removed.items():
        table.add_row(name, str(rows))
    console.print(table)
    for reason, rows in report.kept.items():
        console.print(f"kept {rows} row(s): {reason}")
    for line in report.off:
        console.print(line)
    for name, age in oldest.items():
        console.print(f"oldest deleted row kept in {name}: {_days(age)}")
    tail = "; nothing changed (--dry-run)" if report.dry_run else ""
    console.print(f"{report.total} row(s) {verb}{tail}")


@app.command()
def purge(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only count what would go; change "
                                 "nothing."),
    member: str | None = typer.Option(
        None, "--member", help="Erase this withdrawn member now (an erasure request): id:N, "
        "ref:X or a bare id or external ref. An active member is refused."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary instead."),
) -> None:
    """Hard-delete what the retention policy says is due, now: notes deleted or replaced longer
    ago than PINLOG_RETENTION_DELETED with their vectors, keywords and analysis, withdrawn
    members, and history older than PINLOG_RETENTION_EVENTS. Prints counts per table."""
    from pinlog.composition import erase_member, retention_parts
    from pinlog.db.retention import purge_all, refresh_oldest

    config = config_or_exit()

    async def work(needs: Needs) -> tuple[PurgeReport, list[int] | None, dict[str, float | None]]:
        if member is not None:
            members, report = await erase_member(config, needs.engine, member, dry_run=dry_run)
            return report, members, {}
        parts = retention_parts(config, needs.engine)
        report = await purge_all(parts, dry_run=dry_run)
        return report, None, await refresh_oldest(parts)

    report, members, oldest = run_command(config, work)
    if as_json:
        typer.echo(json.dumps({"dryRun": report.dry_run, "members": members,
                               "removed": report.removed, "kept": report.kept,
                               "off": report.off, "oldestKeptSeconds": oldest,
                               "total": report.total}))
        return
    _print(report, members, oldest)
