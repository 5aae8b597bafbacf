"""Benchmark: the retention job costs O(what is due), not O(the tables) (issue 31).

N live notes (member, record, note, a COMPLETED state row as old as the dead ones', an 8-float
vector, a keyword row, an analysis row, 3 events 30 days old each) plus, each round, D dead
notes (deleted, cancelled 31 days ago, with the same rows and 3 events 91 days old). Per round: a **due** purge (both parts, batches of 500) removes the D
notes and every old event row of the round — timed, rows per second — then an **idle** purge
with nothing due (the steady state between deletions) — timed. Also ``EXPLAIN (ANALYZE,
BUFFERS)`` of the picks (rolled back), which must use the retention indexes.

Run: ``python bench/bench_retention.py [--live 1000000] [--dead 10000] [--rounds 3]``. Uses
PINLOG_TEST_DATABASE_URL (a maintenance-database URL) when set, otherwise a throw-away embedded
PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text

from pinlog.ai.retention import Q as AI_Q
from pinlog.composition import build_config, retention_parts
from pinlog.core.retention import Q as CORE_Q
from pinlog.db.engine import create_engine
from pinlog.db.retention import purge_all
from pinlog.settings import load_settings
from scratch_db import scratch_database  # bench/scratch_db.py (run as a script)
from serve_harness import JWT_SECRET, SECRET  # bench/serve_harness.py

VECTOR = "[" + ",".join(["0.35355"] * 8) + "]"
PRESET = 301


def _notes(conn: psycopg.Connection, n: int, *, dead: bool) -> None:
    """``n`` notes with every row a processed note has, their state rows changed 31 days ago:
    dead ones deleted and cancelled then, with 3 events 91 days old (past both retentions);
    live ones COMPLETED, with 3 events 30 days old (kept)."""
    def top(table: str) -> int:  # new identity values come after every id there is
        return conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]

    deleted = "now() - interval '31 days'" if dead else "NULL"
    status = "'CANCELLED'" if dead else "'COMPLETED'"
    event_age = "interval '91 days'" if dead else "interval '30 days'"
    place, record, start = top("core.place"), top("core.record"), top("core.context")
    conn.execute("INSERT INTO core.place (external_place_id, name, lat, lng) "
                 "SELECT 'b-' || (%(s)s + g), 'place', 37.5, 127.0 "
                 "FROM generate_series(1, %(n)s) g", {"s": place, "n": n})
    conn.execute(f"INSERT INTO core.record (member_id, place_id, deleted_at) "
                 f"SELECT 1, p.id, {deleted} FROM core.place p WHERE p.id > %(s)s",
                 {"s": place})
    conn.execute(f"INSERT INTO core.context (record_id, member_id, body, deleted_at) "
                 f"SELECT r.id, 1, '조용한 카페 ' || r.id, {deleted} FROM core.record r "
                 f"WHERE r.id > %(s)s", {"s": record})
    conn.execute(f"INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, "
                 f"updated_at) SELECT id, {status}, {status}, now() - interval '31 days' "
                 f"FROM core.context WHERE id > %(s)s", {"s": start})
    conn.execute("INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
                 "embedding_profile, text_sha256, is_deleted) SELECT id, 1, record_id, "
                 "CAST(%(v)s AS vector), 'bench', sha256(body::bytea), deleted_at IS NOT NULL "
                 "FROM core.context WHERE id > %(s)s", {"s": start, "v": VECTOR})
    conn.execute("INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, "
                 "preset_version) SELECT id, %(k)s, 0.9, 1 FROM core.context WHERE id > %(s)s",
                 {"s": start, "k": PRESET})
    conn.execute("INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                 "model_profile) SELECT id, 1, 'bench' FROM core.context WHERE id > %(s)s",
                 {"s": start})
    conn.execute(f"INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, "
                 f"actor, reason, at) SELECT c.id, 'embedding', NULL, 'PENDING', 'core', "
                 f"'created', now() - {event_age} FROM core.context c, generate_series(1, 3) "
                 f"WHERE c.id > %(s)s", {"s": start})


def populate(url: str, live: int) -> None:
    """The live rows (and one member, one preset)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO core.member (external_ref) VALUES ('bench')")
        conn.execute("INSERT INTO ai.keyword_preset (id, code, display_name, category, "
                     "description, examples) VALUES (%s, 'QUIET', 'Quiet', 'ATMOSPHERE', 'q', "
                     "ARRAY['a', 'b'])", (PRESET,))
        for done in range(0, live, 100_000):
            _notes(conn, min(100_000, live - done), dead=False)
        conn.execute("VACUUM ANALYZE")


PLANS = (("ai pick_cancelled_contexts", AI_Q, "pick_cancelled_contexts"),
         ("ai purge_old_events", AI_Q, "purge_old_events"),
         ("core purge_contexts", CORE_Q, "purge_contexts"))


async def measure(url: str, dead: int, rounds: int) -> dict[str, Any]:
    settings = load_settings(database_url=url, internal_secrets=SECRET, jwt_secret=JWT_SECRET,
                             rescan_enabled=False, retention_enabled=False,
                             data_dir=Path(tempfile.mkdtemp()))
    config = build_config(settings)
    engine = create_engine(url, pool_size=4)
    due: list[float] = []
    idle: list[float] = []
    rows: list[int] = []
    plans: dict[str, str] = {}
    try:
        parts = retention_parts(config, engine)
        for _ in range(rounds):
            with psycopg.connect(url, autocommit=True) as conn:
                _notes(conn, dead, dead=True)
                conn.execute("ANALYZE")
            if not plans:
                params = {"retention": config.ai.retention.deleted,
                          "late_result_window": config.ai.retention.late_result_window,
                          "after_at": None, "after_id": 0, "batch_size": 500, "apply": False}
                async with engine.connect() as conn:
                    for label, queries, name in PLANS:
                        p = dict(params)
                        if name == "purge_old_events":
                            p["retention"] = config.ai.retention.events
                        plan = (await conn.execute(text(
                            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + queries.sql(name)),
                            p)).scalars().all()
                        plans[label] = "\n".join(plan)
                    await conn.rollback()
            started = time.perf_counter()
            report = await purge_all(parts)
            due.append(time.perf_counter() - started)
            rows.append(report.total)
            assert report.removed["core.context"] == dead, report.removed
            assert report.removed["ai.context_ai_event"] == 3 * dead, report.removed
            started = time.perf_counter()
            report = await purge_all(parts)
            idle.append(time.perf_counter() - started)
            assert report.total == 0, report.removed
    finally:
        await engine.dispose()
    return {"due_s": due, "idle_s": idle, "rows": rows, "plans": plans,
            "uses_indexes": {label: index in plans[label] for label, index in (
                ("ai pick_cancelled_contexts", "context_ai_state_cancelled_idx"),
                ("ai purge_old_events", "context_ai_event_at_idx"),
                ("core purge_contexts", "context_deleted_idx"))}}


def run(live: int, dead: int, rounds: int,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Populate a scratch database with ``live`` notes and measure ``rounds`` rounds of
    ``dead`` due notes each."""
    with scratch_database() as url:
        t0 = time.monotonic()
        populate(url, live)
        log(f"retention: populated {live:,} live notes in {time.monotonic() - t0:.0f} s")
        result = asyncio.run(measure(url, dead, rounds))
    return {"live": live, "dead": dead, **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    r = run(args.live, args.dead, args.rounds)
    ms = [t * 1000 for t in r["idle_s"]]
    rate = [n / t for n, t in zip(r["rows"], r["due_s"], strict=True)]
    print(f"{r['live']:,} live notes, {r['dead']:,} due per round ({r['rows'][0]:,} rows)")
    print(f"due round: median {statistics.median(r['due_s']):.2f} s "
          f"({statistics.median(rate):,.0f} rows/s); idle round: median "
          f"{statistics.median(ms):.1f} ms")
    for label, uses in r["uses_indexes"].items():
        print(f"{label}: {'uses its index' if uses else 'NO INDEX'}")
    return 0 if all(r["uses_indexes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
