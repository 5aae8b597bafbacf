"""``pinlog presets load [FILE]`` and ``pinlog presets list`` (SPEC §8).

Thin typer commands: the work is in :mod:`pinlog.ai.presets`.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pinlog.ai.presets import (
    PresetLoadReport,
    default_preset_path,
    load_preset_file,
    load_presets,
    preset_overview,
)
from pinlog.cli.app import Needs, app, command_log_context, config_or_exit, exit_with_error, run_command

console = Console(soft_wrap=True, highlight=False)
presets_app = typer.Typer(help="Keyword presets: load and list.", no_args_is_help=True,
                          callback=command_log_context)
app.add_typer(presets_app, name="presets")


def _ids(values: list[int]) -> str:
    return ", ".join(map(str, values)) if values else "-"


@presets_app.command("load")
def load(
    file: Path | None = typer.Argument(
        None, help="Preset YAML ({presets: [...]}). Default: the packaged presets_default.yaml.",
        exists=True, dir_okay=False, readable=True, metavar="FILE"),
    keep_missing: bool = typer.Option(
        False, "--keep-missing", help="Do not retire active presets that are absent from FILE."),
    reembed: bool = typer.Option(
        False, "--reembed", help="Re-embed every preset (after a preset-embedding change)."),
) -> None:
    """Embed the presets with the current profile and upsert them idempotently.

    Presets absent from the file are retired (never deleted). A second run with the same file
    changes nothing.
    """
    config = config_or_exit()
    presets = load_preset_file(file)

    async def work(needs: Needs) -> PresetLoadReport:
        # through the micro-batcher: the server's input cap, throttling, per-call timeouts
        return await load_presets(needs.engine, presets, config.ai.embedding,
                                  config.ai.batching, config.ai.pipeline.retries,
                                  retire_missing=not keep_missing, reembed=reembed)

    try:
        report = run_command(config, work)
    except ValueError as exc:  # provider settings (PresetFileError: a code conflict)
        exit_with_error(str(exc), 2)
    source = file or default_preset_path()
    console.print(f"presets from {source.name}: {len(presets)}; {report.summary()}")
    for label, ids in (("inserted", report.inserted), ("updated", report.updated),
                       ("retired", report.retired), ("embedded", report.embedded)):
        if ids:
            console.print(f"  {label}: {_ids(ids)}")
    if not report.changed:
        console.print("  no change")


@presets_app.command("list")
def list_presets() -> None:
    """Show every preset: id, code, name, category, visibility, active, embedded for the
    current profile."""
    config = config_or_exit()
    rows = run_command(config, lambda needs: preset_overview(needs.engine, config.profile))
    wide = Console(width=max(console.width, 120))  # never truncate codes, even in a pipe
    table = Table(title=f"keyword presets (profile {config.profile})")
    for column in ("id", "code", "name", "category", "visibility", "active", "embedded", "version"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row.id), row.code, row.display_name, row.category, row.visibility,
                      "yes" if row.is_active else "no", "yes" if row.embedded else "no",
                      str(row.version))
    wide.print(table)
    usable = sum(1 for r in rows if r.is_active and r.embedded and r.visibility != "BLOCKED")
    console.print(f"{len(rows)} presets, {usable} usable for profile {config.profile}")

