"""``pinlog import``, and the import job it shares with ``pinlog demo``: create through the
core services with a progress bar, wait for the AI stages, summarise."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.cli.app import Needs, app, config_or_exit, run_command
from pinlog.contracts import BatchProcessClient
from pinlog.core.importer import (ImportReport, ParsedFile, StageSummary, active_context_ids,
                                  import_lines, parse_import_file, summarize, wait_for_stages)

if TYPE_CHECKING:
    from pinlog.core.runtime import CoreRuntime

#: Dispatch back-pressure: above this many queued requests the import waits for the queue.
DISPATCH_HIGH_WATER = 50


@dataclass
class ImportOutcome:
    """Report of the creation step, final stage summary, and whether we waited."""

    report: ImportReport
    summary: StageSummary
    waited: bool
    finished: bool
    seconds: float
    lines: int = 0

    def as_json(self) -> dict[str, object]:
        """The ``--json`` summary line: contexts, per-stage status counts, seconds, and the
        lines: ``lines`` read (not blank), ``imported`` (each made one context), ``skipped``
        (member + place already had an active record), ``bad`` (malformed or refused: the
        ``line N: …`` messages)."""
        report = self.report
        return {"contexts": self.summary.contexts, "embedding": self.summary.embedding,
                "keyword": self.summary.keyword, "seconds": round(self.seconds, 2),
                "lines": self.lines, "imported": len(report.context_ids),
                "skipped": report.lines_skipped, "bad": len(report.errors)}


class DispatchTally(logging.Filter):
    """Counts the dispatch log lines of one command by outcome and keeps them off the terminal,
    so a run with the ai side unreachable prints one summary instead of one line per request."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        outcome = getattr(record, "outcome", None)
        if outcome is None and "dispatch queue full" in record.getMessage():
            outcome = "dropped"
        if outcome is None or outcome == "accepted" or record.levelno < logging.WARNING:
            return True
        # a process-batch call logs one line per outcome with the number of its contexts
        self.outcomes[str(outcome)] += int(getattr(record, "count", None) or 1)
        return False

    def summary(self) -> str | None:
        """One line, or None when every request was delivered."""
        if not self.outcomes:
            return None
        total = sum(self.outcomes.values())
        detail = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        hint = (" — the internal secret was not accepted: check PINLOG_INTERNAL_SECRETS on both "
                "sides" if "unauthorized" in self.outcomes else "")
        return (f"dispatch: {total} process request(s) not delivered ({detail}){hint}; those "
                "contexts stay PENDING and the rescan (pinlog serve, pinlog rescan) sends them "
                "again")


@contextmanager
def tallied_dispatch_logs() -> Iterator[DispatchTally]:
    """Install a :class:`DispatchTally` on core's dispatch logger for the block."""
    tally = DispatchTally()
    logger = logging.getLogger("pinlog.core.dispatch")
    logger.addFilter(tally)
    try:
        yield tally
    finally:
        logger.removeFilter(tally)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=False)


async def run_import(needs: Needs, parsed: ParsedFile, *, wait: bool, timeout: float,
                     console: Console) -> ImportOutcome:
    """Import ``parsed`` (ai side in-process unless ``PINLOG_AI_BASE_URL``), optionally wait.

    Raises:
        StartupError: the in-process ai side refused to start (no presets, not migrated).
    """
    async with needs.running() as parts:
        assert parts.core is not None
        return await import_with(parts.core, needs.engine, parsed, wait=wait, timeout=timeout,
                                 console=console)


async def import_with(core: CoreRuntime, engine: AsyncEngine, parsed: ParsedFile, *,
                      wait: bool, timeout: float, console: Console,
                      include_existing: bool = False) -> ImportOutcome:
    """Import ``parsed`` through a running core runtime (``core.service``, ``core.dispatcher``,
    ``core.client``); with ``wait``, wait for the AI stages (nudging stalled PENDING ones).

    Args:
        include_existing: wait for and summarise the active contexts of records that were
            already present too (``pinlog demo`` re-run on a kept data dir), not only new ones.
    """
    started = time.monotonic()
    service, collector = core.service, None
    batch = core.config.dispatch.dispatch_batch
    if batch > 1 and isinstance(core.client, BatchProcessClient):
        # the batch path (docs/ARCHITECTURE.md "Batch path"): the committed contexts go to the
        # ai side `batch` at a time (process-batch), paced by its queue
        from pinlog.core.dispatch import BatchCollector
        from pinlog.core.services import CoreService

        collector = BatchCollector(core.client, batch, core.config.dispatch.busy_wait)
        service = CoreService(engine, collector, core.config.service)

    async def throttle() -> None:
        if collector is not None:
            if collector.pending >= batch:
                await collector.flush()
        elif core.dispatcher.depth >= DISPATCH_HIGH_WATER:
            await core.dispatcher.join()

    with _progress(console) as progress:
        task = progress.add_task("creating records", total=len(parsed.lines))
        report = await import_lines(service, parsed,
                                    lambda n: progress.advance(task, n), throttle)
    if collector is not None:
        await collector.flush()
    finished = True
    ids = report.context_ids
    if include_existing and report.records_existing:
        ids = await active_context_ids(engine, sorted(set(report.record_keys.values())))
    if wait and ids:
        from pinlog.core.rescan import resend

        async def nudge(pending: list[int]) -> None:
            await resend(engine, core.client, pending,
                         concurrency=core.config.rescan.concurrency, actor="import",
                         batch_size=core.config.rescan.dispatch_batch)

        await core.dispatcher.join()
        with _progress(console) as progress:
            task = progress.add_task("AI stages", total=len(ids))
            finished = await wait_for_stages(
                engine, ids, timeout=timeout, nudge=nudge,
                progress=lambda done: progress.update(task, completed=done))
    summary = await summarize(engine, ids)
    return ImportOutcome(report=report, summary=summary, waited=wait, finished=finished,
                         seconds=time.monotonic() - started, lines=parsed.read)


def print_import_outcome(console: Console, outcome: ImportOutcome) -> None:
    """Human summary: what was created, stage states, keywords, failures, bad lines."""
    report, summary = outcome.report, outcome.summary
    console.print(f"members created {report.members_created}, records created "
                  f"{report.records_created}, already present {report.records_existing}, "
                  f"contexts {len(report.context_ids)} in {outcome.seconds:.1f} s")
    console.print(f"lines: {outcome.lines} read, {len(report.context_ids)} imported, "
                  f"{report.lines_skipped} skipped (already present), {len(report.errors)} bad")
    if report.context_ids:
        table = Table(title="contexts by final state")
        table.add_column("stage")
        statuses = ("PENDING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED")
        for status in statuses:
            table.add_column(status, justify="right")
        for stage in ("embedding", "keyword"):
            counts = getattr(summary, stage)
            table.add_row(stage, *[str(counts.get(s, 0)) for s in statuses])
        console.print(table)
        console.print(f"keywords assigned: {summary.keywords_assigned}")
    if outcome.waited and not outcome.finished:
        console.print("[yellow]timed out waiting; the rescan will finish the rest[/yellow]")
    for context_id, emb, kw, error in summary.failures:
        console.print(f"context {context_id}: embedding {emb}, keyword {kw}"
                      f"{': ' + error if error else ''}", style="red", markup=False,
                      highlight=False)
    for number, message in report.errors:
        console.print(f"line {number}: {message}", style="red", markup=False, highlight=False)


@app.command("import")
def import_file(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, metavar="FILE",
                                help="JSONL place notes: one object a line with member, record, place "
                                "{name, external_place_id, lat, lng, address?} and context (the note)."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the AI stages finish."),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait at most."),
    as_json: bool = typer.Option(False, "--json", help="End with one JSON summary line."),
) -> None:
    """Import members, records and contexts from a JSONL file through the core services.

    Re-importing the same file does not duplicate records (member + external place id).
    Malformed lines are reported with their line numbers and skipped. When the ai side runs in
    this process (no PINLOG_AI_BASE_URL), the command always waits for the work it dispatched.
    """
    config = config_or_exit()
    parsed = parse_import_file(file, max_text_chars=config.core.service.max_text_chars)
    console = Console(stderr=as_json)
    in_process = config.core.dispatch.ai_base_url is None
    with tallied_dispatch_logs() as tally:
        outcome = run_command(config, lambda needs: run_import(
            needs, parsed, wait=wait or in_process, timeout=timeout, console=console))
    print_import_outcome(console, outcome)
    line = tally.summary()
    if line:
        from pinlog.cli.app import err_console

        err_console.print(line, style="yellow", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(outcome.as_json()))
    if outcome.report.errors or (outcome.waited and not outcome.summary.all_completed):
        raise typer.Exit(1)
