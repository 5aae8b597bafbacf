"""Backfill throughput: the batch path vs pgai's vectorizer worker (issue 25).

A backfill — a bulk import, ``pinlog reprocess``, a new profile, the rescan's re-sends — is N
contexts that already exist in core with PENDING state rows. Here the rows are written with
plain SQL, then re-sent the way reprocess and the rescan send them (``pinlog.core.rescan.resend``
with ``PINLOG_PROCESS_BATCH_SIZE``: one re-read and one process-batch call per batch) through the
in-process adapter to the ai runtime of the same process, which runs them through the batch path
(one claim, one embedding call per ≤ 64 texts, one write per stage per batch, both stages, the
similarity judge on the shipped presets). Rate: contexts from the first send until every state
row is COMPLETED/COMPLETED; CPU: this process (core + ai) and PostgreSQL's own, per context.

Side by side, in one run, per round:

* **ours, fake at the Protocol** — :class:`FastConstantProvider`: 2 ms per call (``asyncio``
  sleep: no CPU) of at most ``PINLOG_EMBEDDING_BATCH_SIZE`` = 64 texts, 384 dimensions;
* **ours over HTTP** — the ``openai`` provider against the fake OpenAI-compatible server
  (``bench/fake_model.py serve``: its own process, 2 ms per call, 384 dimensions);
* **pgai** — pgai's vectorizer worker (``pgai`` 0.12.1, in this process) embedding the same notes
  with the same fake server into its own database of the same PostgreSQL server (it uses a
  schema named ``ai`` too): ``ai.create_vectorizer`` with ``loading_column``, ``parsing_none``,
  ``chunking_none``, ``embedding_openai(…, 384, base_url => fake)``, ``processing_default(
  batch_size => 64, concurrency => C)``; rate: notes from the worker's start until its
  embeddings table holds them all. pgai embeds only (no keyword stage, no state machine).

Besides: a cProfile of one more "ours, Protocol" backfill summarised by component (where the
remaining time goes), and the physical limit: a multi-row insert of 384-dimension vectors into
``ai.context_embedding`` alone (the batch path's own statement form: one binary ``real[]``
parameter sliced per row), rows/s, at 64 and at 1,000 rows per statement.

    .venv/bin/python bench/bench_backfill.py [--n 4000] [--rounds 3] [--quick]
"""

from __future__ import annotations

import asyncio
import cProfile
import datetime
import json
import logging
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import server_cpu  # noqa: E402  bench/bench_pipeline.py
from common import side_by_side_parser  # noqa: E402  bench/common.py
from scratch_db import scratch_database  # noqa: E402
from serve_harness import note_texts  # noqa: E402

from pinlog.ai.ports import EmbedKind  # noqa: E402
from pinlog.ai.vectors import Float4Array  # noqa: E402
from pinlog.composition import build_config, running_components  # noqa: E402
from pinlog.core.rescan import resend  # noqa: E402
from pinlog.db.engine import create_engine  # noqa: E402
from pinlog.settings import Settings, load_settings  # noqa: E402

DIMENSION = 384
PROFILE = "bench-fake-384-cosine-v1"
HTTP_PROFILE = "bench-fake-openai-384-cosine-v1"
BATCH = 64
DELAY = 0.002
SECRET = "bench-secret-0123456789"
ROOT = Path(__file__).resolve().parents[1]


class FastConstantProvider:
    """A fake embedding model at the Protocol: every ``embed`` call takes ``delay`` seconds
    (``asyncio.sleep``: no CPU) whatever its size, and returns unit vectors drawn from a fixed
    pool by a hash of each text (deterministic within the run, ~1 µs a text: the fake's own
    CPU stays out of the measure). Counts calls and texts."""

    def __init__(self, delay: float = DELAY, dimension: int = DIMENSION,
                 profile: str = PROFILE) -> None:
        self.profile, self.dimension, self.delay = profile, dimension, delay
        pool = np.random.default_rng(25).standard_normal((1024, dimension)).astype(np.float32)
        self._pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
        self.calls = 0
        self.texts = 0
        self.largest = 0

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        self.largest = max(self.largest, len(texts))
        await asyncio.sleep(self.delay)
        return self._pool[[hash(t) % len(self._pool) for t in texts]]


class FakeServer:
    """``bench/fake_model.py serve`` in a process of its own: ``base_url``; :meth:`stop`."""

    def __init__(self, dimension: int = DIMENSION, delay: float = DELAY) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "fake_model.py"), "serve",
             "--dimension", str(dimension), "--delay", str(delay)],
            stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError("the fake model server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def settings_for(url: str, *, http: str | None = None) -> Settings:
    values: dict[str, Any] = dict(
        data_dir=Path(tempfile.mkdtemp(prefix="pinlog-bench-backfill-")), database_url=url,
        internal_secrets=SECRET, jwt_secret="x" * 40, rescan_enabled=False,
        embedding_batch_size=BATCH, process_batch_size=BATCH, log_level="WARNING")
    if http is None:
        values.update(embedding_profile=PROFILE, embedding_dimension=DIMENSION)
    else:
        # the openai provider's own input cap is 32 (TEI's default): the fake server takes 64,
        # as pgai is given (batch_size 64), so both sides send calls of the same size
        values.update(embedding_provider="openai", embedding_base_url=http,
                      embedding_max_inputs=BATCH,
                      embedding_model="fake-embed", embedding_api_key="fake-key",
                      embedding_profile=HTTP_PROFILE, embedding_dimension=DIMENSION)
    return load_settings(**values)


def populate(url: str, texts: list[str], tag: str) -> list[int]:
    """One member, a place + record + context per text, and PENDING state rows (plain SQL,
    what core's create leaves behind); returns the context ids."""
    n = len(texts)
    with psycopg.connect(url, autocommit=True) as conn:
        member = conn.execute("INSERT INTO core.member (external_ref) VALUES (%s) RETURNING id",
                              (f"bench-backfill-{tag}",)).fetchone()[0]
        ids = [row[0] for row in conn.execute(
            """WITH places AS (
                   INSERT INTO core.place (external_place_id, name, lat, lng)
                   SELECT %(tag)s || '-' || i, 'place ' || i, 37.5, 127.0
                     FROM generate_series(1, %(n)s) AS i
                   RETURNING id, external_place_id),
               records AS (
                   INSERT INTO core.record (member_id, place_id)
                   SELECT %(member)s, id FROM places RETURNING id, place_id),
               numbered AS (
                   SELECT r.id AS record_id,
                          CAST(split_part(p.external_place_id, '-', 2) AS int) AS i
                     FROM records r JOIN places p ON p.id = r.place_id),
               contexts AS (
                   INSERT INTO core.context (record_id, member_id, body)
                   SELECT nb.record_id, %(member)s, t.body
                     FROM numbered nb
                     JOIN unnest(CAST(%(texts)s AS text[])) WITH ORDINALITY AS t(body, i)
                       ON t.i = nb.i
                   RETURNING id)
               INSERT INTO ai.context_ai_state (context_id) SELECT id FROM contexts
               RETURNING context_id""",
            {"tag": tag, "n": n, "member": member, "texts": texts}).fetchall()]
    return sorted(ids)


def unfinished(url: str, ids: list[int]) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) AND NOT "
            "(embedding_status = 'COMPLETED' AND keyword_status = 'COMPLETED')",
            (ids,)).fetchone()[0]


async def backfill(url: str, settings: Settings, texts: list[str], tag: str, *,
                   provider: Any = None, profiler: cProfile.Profile | None = None) -> dict[str, Any]:
    """One backfill of ``texts`` (module docstring): rate, CPU per context (this process and
    PostgreSQL), the model calls and the largest call."""
    from pinlog.ai.judges import build_judge
    from pinlog.ai.presets import load_preset_file, upsert_presets

    config = build_config(settings)
    engine = create_engine(url, pool_size=settings.db_pool_size)
    embedder = provider or config.ai.embedding.build()
    try:
        await upsert_presets(engine, load_preset_file(), embedder)
        ids = populate(url, texts, tag)
        judge = build_judge(config.ai.judge, embedder, config.ai.calibration)
        async with running_components(config, engine, rescan=False,
                                      ai_kwargs={"provider": embedder, "judge": judge}) as parts:
            assert parts.core is not None and parts.ai is not None
            client = parts.core.client
            started, cpu0, db0 = time.perf_counter(), time.process_time(), server_cpu(url)
            if profiler is not None:
                profiler.enable()
            report = await resend(engine, client, ids, concurrency=config.core.rescan.concurrency,
                                  actor="reprocess", busy_wait=600.0, batch_size=BATCH)
            await parts.ai.join()
            if profiler is not None:
                profiler.disable()
            elapsed = time.perf_counter() - started
            app_cpu, db_cpu = time.process_time() - cpu0, server_cpu(url) - db0
    finally:
        await engine.dispose()
    left = unfinished(url, ids)
    out = {"n": len(ids), "seconds": elapsed, "rate": len(ids) / elapsed,
           "app_cpu_ms": app_cpu / len(ids) * 1000, "db_cpu_ms": db_cpu / len(ids) * 1000,
           "not_completed": left, "dispatched": len(report.dispatched)}
    if isinstance(embedder, FastConstantProvider):
        out.update(calls=embedder.calls, largest_call=embedder.largest)
    else:
        await embedder.aclose()
    return out


# --- pgai's vectorizer worker ---------------------------------------------------------------
def sibling_database(url: str, name: str) -> str:
    """A fresh database ``name`` on the server of ``url`` (dropped first if it exists)."""
    base = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    name = make_url(url).database
    base = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pgai_backfill(url: str, texts: list[str], fake_url: str, tag: str, *,
                  concurrency: int) -> dict[str, Any]:
    """pgai's vectorizer worker on the notes ``texts`` in its own database (module docstring)."""
    import pgai
    from pgai.vectorizer import Worker

    os.environ.setdefault("OPENAI_API_KEY", "fake-key")
    for name in ("pgai", "pgai.vectorizer", "httpx", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)
    db = sibling_database(url, f"pgai_bench_{tag}")
    try:
        pgai.install(db)
        table = f"notes_{tag}"
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, body text NOT NULL)")
            conn.execute(f"INSERT INTO {table} SELECT i, t FROM unnest(CAST(%s AS text[])) "
                         "WITH ORDINALITY AS x(t, i)", (texts,))
            conn.execute(
                "SELECT ai.create_vectorizer(CAST(%(table)s AS regclass), "
                "loading => ai.loading_column('body'), parsing => ai.parsing_none(), "
                "embedding => ai.embedding_openai('fake-embed', 384, base_url => %(fake)s), "
                "chunking => ai.chunking_none(), indexing => ai.indexing_none(), "
                "scheduling => ai.scheduling_none(), "
                "processing => ai.processing_default(batch_size => %(batch)s, "
                "concurrency => %(concurrency)s), "
                "destination => ai.destination_table(CAST(%(destination)s AS name)))",
                {"table": table, "fake": fake_url, "batch": BATCH, "concurrency": concurrency,
                 "destination": f"{table}_embeddings"})
        started, cpu0, db0 = time.perf_counter(), time.process_time(), server_cpu(url)
        asyncio.run(Worker(db, once=True, poll_interval=datetime.timedelta(seconds=1)).run())
        elapsed = time.perf_counter() - started
        app_cpu, db_cpu = time.process_time() - cpu0, server_cpu(url) - db0
        with psycopg.connect(db) as conn:
            stored = conn.execute(f"SELECT count(*) FROM {table}_embeddings_store").fetchone()[0]
    finally:
        drop_database(db)
    return {"n": len(texts), "stored": stored, "seconds": elapsed, "rate": len(texts) / elapsed,
            "app_cpu_ms": app_cpu / len(texts) * 1000, "db_cpu_ms": db_cpu / len(texts) * 1000,
            "concurrency": concurrency}


# --- the physical limit -------------------------------------------------------------------------
INSERT_ONLY = """
INSERT INTO ai.context_embedding
       (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
SELECT i.context_id, 1, 1, CAST(v.flat[(i.n - 1) * %(dimension)s + 1 : i.n * %(dimension)s] AS vector),
       'bench-insert-limit', %(sha)s, now()
  FROM unnest(CAST(%(ids)s AS bigint[])) WITH ORDINALITY AS i(context_id, n),
       (SELECT CAST(%(embeddings)s AS real[]) AS flat) AS v
"""


def insert_limit(url: str, rows: int, per_statement: int) -> float:
    """rows/s of multi-row inserts of 384-dimension vectors into ``ai.context_embedding``
    alone (one transaction per statement, ``per_statement`` rows each)."""
    rng = np.random.default_rng(7)
    first = 2_000_000_000
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        for start in range(0, rows, per_statement):
            n = min(per_statement, rows - start)
            vectors = rng.standard_normal((n, DIMENSION)).astype(np.float32)
            conn.execute(INSERT_ONLY, {"ids": list(range(first + start, first + start + n)),
                                       "embeddings": Float4Array(vectors),
                                       "dimension": DIMENSION, "sha": b"\x01" * 32})
            conn.commit()
        elapsed = time.perf_counter() - started
        conn.execute("DELETE FROM ai.context_embedding WHERE context_id >= %s", (first,))
        conn.commit()
    return rows / elapsed


# --- where the time goes --------------------------------------------------------------------
def _component(path: str) -> str:
    if "/src/pinlog/" in path:
        return "pinlog/" + path.split("/src/pinlog/", 1)[1]
    match = re.search(r"site-packages/([^/]+)", path)
    if match:
        name = match.group(1)
        return name[:-3] if name.endswith(".py") else name
    if path.startswith("<frozen") or path == "~":
        return "builtins (C, not attributed)"
    match = re.search(r"python3\.\d+/([^/]+)", path)
    if match:
        name = match.group(1)
        return "stdlib " + (name[:-3] if name.endswith(".py") else name)
    return path.rsplit("/", 1)[-1]


def profile_summary(profiler: cProfile.Profile, n: int, top: int = 12) -> list[dict[str, Any]]:
    """Own time (cProfile tottime) by component, ms per context and share, largest first."""
    totals: Counter[str] = Counter()
    for (path, _line, _name), (_cc, _nc, tottime, _ct, _callers) in \
            pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        totals[_component(path)] += tottime
    whole = sum(totals.values()) or 1.0
    return [{"component": name, "ms_per_ctx": seconds / n * 1000, "share": seconds / whole}
            for name, seconds in totals.most_common(top)]


class AnalyserClock:
    """Within the block, the CPU time the batch path's morphology priming takes on its own
    threads (``pinlog.text.prime`` in a worker thread: cProfile sees only the event loop's)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> AnalyserClock:
        from pinlog.ai import batch

        self._real = real = batch.prime

        def timed(texts: Any) -> None:
            started = time.thread_time()
            try:
                real(texts)
            finally:
                self.seconds += time.thread_time() - started

        batch.prime = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        from pinlog.ai import batch

        batch.prime = self._real  # type: ignore[assignment]


# --- the run ---------------------------------------------------------------------------------
def run(url: str, *, n: int, rounds: int, pgai_concurrency: int, insert_rows: int,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "batch": BATCH, "delay": DELAY, "dimension": DIMENSION,
                           "ours": [], "ours_http": [], "pgai": [], "ratio_http": [],
                           "ratio_protocol": []}
    texts = note_texts(n * (2 * rounds + 2))
    fake = FakeServer()
    try:
        # warm-up (not counted): the analyser's model, presets, pool connections
        warm = max(64, n // 10)
        asyncio.run(backfill(url, settings_for(url), texts[-warm:], "warm",
                             provider=FastConstantProvider()))
        for r in range(rounds):
            chunk = texts[2 * r * n:(2 * r + 1) * n]
            ours = asyncio.run(backfill(url, settings_for(url), chunk, f"p{r}",
                                        provider=FastConstantProvider()))
            http = asyncio.run(backfill(url, settings_for(url, http=fake.base_url),
                                        texts[(2 * r + 1) * n:(2 * r + 2) * n], f"h{r}"))
            peer = pgai_backfill(url, chunk, fake.base_url, f"r{r}",
                                 concurrency=pgai_concurrency)
            out["ours"].append(ours)
            out["ours_http"].append(http)
            out["pgai"].append(peer)
            out["ratio_http"].append(http["rate"] / peer["rate"])
            out["ratio_protocol"].append(ours["rate"] / peer["rate"])
            log(f"  round {r + 1}: ours {ours['rate']:.0f} ctx/s (Protocol fake; CPU "
                f"{ours['app_cpu_ms']:.2f} + PostgreSQL {ours['db_cpu_ms']:.2f} ms/ctx), ours "
                f"over HTTP {http['rate']:.0f} ctx/s, pgai {peer['rate']:.0f} notes/s, "
                f"ours/pgai {http['rate'] / peer['rate']:.2f} (HTTP, same fake server)")
    finally:
        fake.stop()
    log("  profile: one more backfill under cProfile (CPU time)")
    profiler = cProfile.Profile(time.process_time)
    analysis = AnalyserClock()
    with analysis:
        profiled = asyncio.run(backfill(url, settings_for(url),
                                        texts[2 * rounds * n:(2 * rounds + 1) * n], "prof",
                                        provider=FastConstantProvider(), profiler=profiler))
    out["profile"] = profile_summary(profiler, profiled["n"])
    out["profile_rate"] = profiled["rate"]
    out["analyser_ms"] = analysis.seconds / profiled["n"] * 1000
    log(f"  physical limit: multi-row inserts of {insert_rows:,} vectors into ai.context_embedding")
    out["insert_limit"] = {str(per): insert_limit(url, insert_rows, per) for per in (64, 1000)}
    return out


def main() -> int:
    parser = side_by_side_parser(__doc__, n=4000)
    parser.add_argument("--pgai-concurrency", type=int, default=4)
    parser.add_argument("--insert-rows", type=int, default=20_000)
    args = parser.parse_args()
    with scratch_database() as url:
        result = run(url, n=args.n, rounds=args.rounds, pgai_concurrency=args.pgai_concurrency,
                     insert_rows=args.insert_rows)
    med = statistics.median
    print(json.dumps({k: v for k, v in result.items() if k in ("insert_limit", "profile")},
                     indent=1, ensure_ascii=False))
    print(f"median: ours {med(r['rate'] for r in result['ours']):.0f} ctx/s (target >= 1000), "
          f"ours over HTTP {med(r['rate'] for r in result['ours_http']):.0f}, pgai "
          f"{med(r['rate'] for r in result['pgai']):.0f}, ratio {med(result['ratio_http']):.2f} "
          "(target >= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
