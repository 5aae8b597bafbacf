"""``pinlog demo``: the whole job on a fresh embedded database (the work is in :mod:`pinlog.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer

from pinlog.cli.app import app, exit_with_error


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
