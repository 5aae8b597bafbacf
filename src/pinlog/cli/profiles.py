"""``pinlog profiles [build NAME | activate NAME [--force] | drop NAME]`` — switching embedding
profiles with no search outage (SPEC §9.1).

Thin typer commands: the work is in :mod:`pinlog.ai.profiles` (the functions the operator
console calls too). The building profile's provider is the one configured for it here: the
first provider (``PINLOG_EMBEDDING_*``) or the next one (``PINLOG_NEXT_EMBEDDING_*``). Texts
come from core (``CoreService.context_texts``), or, where the backend owns ``core`` (an adopted
database), from a JSON Lines file it exported (``--texts``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from pinlog.cli.app import Needs, app, command_log_context, config_or_exit, exit_with_error, run_command
from pinlog.composition import close_profile_models, core_texts

if TYPE_CHECKING:
    from pinlog.ai.profiles import BuildReport, Progress, TextSource
    from pinlog.ai.routing import ProfileModels
    from pinlog.composition import Config

console = Console(soft_wrap=True, highlight=False)


def _root(ctx: typer.Context) -> None:
    """Embedding profiles: each with its coverage, rate and ETA (no sub-command), or build,
    activate and drop one."""
    command_log_context(ctx)
    if ctx.invoked_subcommand is None:
        show()


profiles_app = typer.Typer(
    help="Embedding profiles side by side: list them (no sub-command), build, activate, drop.",
    invoke_without_command=True, callback=_root)
app.add_typer(profiles_app, name="profiles")

TEXTS_OPTION = typer.Option(
    None, "--texts", exists=True, dir_okay=False, readable=True,
    help="JSON Lines of {\"contextId\": id, \"text\": note} exported by the backend, for a "
         "database whose core is the backend's (adopted). Default: the texts of this core.")


def _configured(config: Config, name: str) -> None:
    """Exit 2 unless a provider is configured here for profile ``name``."""
    from pinlog.composition import configured_profiles

    if name not in configured_profiles(config):
        exit_with_error(f"no embedding provider is configured for profile {name}: set "
                        "PINLOG_NEXT_EMBEDDING_PROVIDER (and its PINLOG_NEXT_EMBEDDING_* "
                        "settings) for it", 2)


def _file_texts(path: Path) -> TextSource:
    """A :class:`~pinlog.ai.profiles.TextSource` over a JSON Lines export (read once, kept in
    memory; texts normalised as at the ai side's contract). Malformed lines stop the command
    with their line numbers (never their content)."""
    from pinlog.text import normalize

    texts: dict[int, str] = {}
    bad: list[int] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                texts[int(item["contextId"])] = normalize(str(item["text"]))
            except (ValueError, KeyError, TypeError):
                bad.append(number)
    if bad:
        exit_with_error(f"{path.name}: malformed lines {', '.join(map(str, bad[:20]))} (each "
                        "line: {\"contextId\": id, \"text\": note})", 2)

    async def source(context_ids: Sequence[int]) -> Mapping[int, str]:
        return {cid: texts[cid] for cid in context_ids if cid in texts}

    return source


def _printer(label: str) -> Callable[[Progress], None]:
    """A progress callback printing one line at most every 2 s."""
    last = [0.0]

    def report(progress: Progress) -> None:
        now = time.monotonic()
        if now - last[0] < 2.0:
            return
        last[0] = now
        eta = progress.eta_seconds
        console.print(f"  {label} {progress.profile}: {progress.done}/{progress.total} "
                      f"({progress.rate:.0f}/s" + (f", ETA {eta:.0f} s)" if eta is not None
                                                    else ")"))

    return report


def _models(config: Config, name: str, *, judge: bool) -> ProfileModels:
    """The profile's models built here (exit 2 when its provider refuses its settings)."""
    from pinlog.composition import profile_models

    _configured(config, name)
    try:
        return profile_models(config, name, judge=judge)
    except ValueError as exc:
        exit_with_error(f"embedding provider refused the settings: {exc}", 2)


@profiles_app.command("build")
def build(
    name: str = typer.Argument(..., help="The profile to build (its provider must be "
                                         "configured: PINLOG_NEXT_EMBEDDING_*)."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, max=10_000,
                                   help="Contexts per fetch-embed-write batch."),
    max_rate: float = typer.Option(0.0, "--max-rate", min=0.0,
                                   help="Most vectors per second on average (0: unlimited); "
                                        "pace a build on a host that also serves searches."),
    texts: Path | None = TEXTS_OPTION,
) -> None:
    """Embed every note for profile NAME beside the active one.

    Search keeps answering from the active profile. Presets are embedded for NAME first.
    Resumable: run it again after a crash or a stop and it goes on where it was.
    """
    from pinlog.ai.profiles import build_profile

    config = config_or_exit()
    _configured(config, name)
    _background_priority()
    source = _file_texts(texts) if texts is not None else None

    async def work(needs: Needs) -> BuildReport:
        models = _models(config, name, judge=False)
        try:
            return await build_profile(
                needs.engine, models, source or core_texts(needs.engine, config),
                active=(config.profile, config.ai.embedding.dimension), batch_size=batch_size,
                retries=config.ai.pipeline.retries, max_rate=max_rate or None,
                progress=_printer("built"))
        finally:
            await close_profile_models(models)

    report = run_command(config, work)
    skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(report.skipped.items()))
    console.print(f"profile {name}: {report.embedded} vectors embedded in {report.seconds:.1f} s"
                  f" (presets embedded {report.presets_embedded}"
                  + (f"; skipped: {skipped}" if skipped else "") + ")")
    if report.stopped:
        console.print(f"  stopped: {report.stopped}")
    _print_overview(config)


@profiles_app.command("activate")
def activate(
    name: str = typer.Argument(..., help="The profile to make active (the previous one is "
                                         "kept: activating it again is the rollback)."),
    force: bool = typer.Option(False, "--force", help="Activate below full coverage (notes "
                               "without a vector of NAME are not found by search until they "
                               "are re-embedded, e.g. by `pinlog reprocess --profile`)."),
    rejudge: bool = typer.Option(True, "--rejudge/--no-rejudge", help="Re-judge the keywords "
                                 "with NAME's presets after the switch (resumable: run "
                                 "`pinlog profiles activate NAME` again)."),
    texts: Path | None = TEXTS_OPTION,
) -> None:
    """Switch every replica to profile NAME at once (refused below full coverage).

    --force activates anyway. Then the keywords are re-judged with NAME's presets; until each
    is, its old keywords stay shown. Run it again to resume the re-judge.
    """
    from pinlog.ai.profiles import ProfileError, activate_profile, rejudge_keywords

    config = config_or_exit()
    source = _file_texts(texts) if texts is not None else None

    async def work(needs: Needs) -> None:
        try:
            report = await activate_profile(
                needs.engine, name, current=(config.profile, config.ai.embedding.dimension),
                force=force)
            console.print(f"profile {name} is active (was {report.previous}): {report.copied} "
                          f"vectors switched, {report.kept} of {report.previous} kept for "
                          "rollback" + (f", {report.missing} notes without a vector of it"
                                        if report.missing else ""))
        except ProfileError as exc:
            if "already the active profile" not in str(exc):
                raise
            console.print(f"profile {name} is already active")
        if not rejudge:
            return
        models = _models(config, name, judge=True)
        try:
            done = await rejudge_keywords(
                needs.engine, models, source or core_texts(needs.engine, config),
                top_k=config.ai.pipeline.candidate_top_k,
                progress=_printer("keywords re-judged"))
        finally:
            await close_profile_models(models)
        skipped = ", ".join(f"{reason} {n}" for reason, n in sorted(done.skipped.items()))
        console.print(f"keywords re-judged with {name}'s presets: {done.rejudged}"
                      + (f" (skipped: {skipped})" if skipped else ""))

    run_command(config, work)


@profiles_app.command("drop")
def drop(name: str = typer.Argument(..., help="An inactive profile.")) -> None:
    """Delete an inactive profile's vectors (its notes' and presets').

    A build of it that is running stops.
    """
    from pinlog.ai.profiles import drop_profile

    config = config_or_exit()
    deleted = run_command(config, lambda needs: drop_profile(needs.engine, name))
    console.print(f"profile {name} dropped: {deleted} vectors deleted")


def _background_priority() -> None:
    """The backfill is background work: this process runs at a lower CPU priority (nice +5,
    as the local model's background thread), so searches served on the same machine keep their
    latency. Best effort (not on every platform)."""
    import os

    from pinlog.ai.providers.local_e5 import BACKGROUND_NICE

    try:
        os.nice(BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _print_overview(config: Config) -> None:
    from pinlog.ai.profiles import profile_overview

    rows = run_command(config, lambda needs: profile_overview(needs.engine,
                                                              current=config.profile))
    table = Table(title="embedding profiles")
    for column in ("profile", "role", "coverage", "keywords", "rate", "ETA", "note"):
        table.add_column(column)
    for row in rows:
        note = []
        if row.role == "building" and row.build_finished_at is not None:
            note.append("built")
        if row.rejudging:
            note.append("re-judging keywords")
        configured = row.profile in {config.profile, config.ai.next_embedding.profile
                                     if config.ai.next_embedding else None}
        if not configured:
            note.append("no provider configured here")
        table.add_row(row.profile, row.role,
                      f"{row.embedded}/{row.eligible} ({row.coverage:.0%})",
                      f"{row.keywords_judged}/{row.keyword_stages}",
                      f"{row.rate:.0f}/s" if row.rate else "-", _duration(row.eta_seconds),
                      ", ".join(note))
    Console(width=max(console.width, 120)).print(table)


def show() -> None:
    """Print every profile with its coverage (contexts embedded ÷ contexts that should be),
    keywords judged with it, rate and ETA of a running build."""
    _print_overview(config_or_exit())
