"""Benchmark: a rescan round must not grow with finished rows (SPEC §2.2, §7; issue 5).

100 stale PENDING rows among 10,000 and among 1,000,000 state rows (the rest COMPLETED or
CANCELLED). For each size, the full round (finalize → claim → re-read + re-send through a no-op
client) is timed several times (the 100 rows are made stale again between rounds) and the median
is reported, then the ratio of the two medians (target ≤ 1.5) and ``EXPLAIN (ANALYZE, BUFFERS)``
of the claim (rolled back), which must use the partial index ``context_ai_state_rescan_idx``.

Run: ``/work/venv/bin/python bench/bench_rescan.py [--rounds 7]``. Uses PINLOG_TEST_DATABASE_URL
(a maintenance-database URL) when set, otherwise a throw-away embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from sqlalchemy import text

from pinlog.contracts import ProcessRequest
from pinlog.core.rescan import RescanLoop, expiry_params, statements
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings
from pinlog.composition import build_config
from scratch_db import scratch_database  # bench/scratch_db.py (run as a script)
from serve_harness import JWT_SECRET, SECRET  # bench/serve_harness.py

STALE = 100
SIZES = (10_000, 1_000_000)


class NoopClient:
    """Accepts everything instantly (measures the rescan, not the ai side)."""

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, request: ProcessRequest) -> int:
        self.sent += 1
        return 202


def populate(url: str, total: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE ai.context_ai_state, ai.context_ai_event, core.context, "
                     "core.record, core.place, core.member RESTART IDENTITY CASCADE")
        conn.execute("INSERT INTO core.member (external_ref) VALUES ('bench')")
        conn.execute(
            "INSERT INTO core.place (external_place_id, name, lat, lng) "
            "SELECT 'bench-' || g, 'place ' || g, 37.5, 127.0 FROM generate_series(1, %s) g",
            (STALE,))
        conn.execute("INSERT INTO core.record (member_id, place_id) SELECT 1, id FROM core.place")
        conn.execute("INSERT INTO core.context (record_id, member_id, body) "
                     "SELECT id, 1, '조용한 카페 ' || id FROM core.record")
        # the stale rows: PENDING for an hour
        conn.execute("INSERT INTO ai.context_ai_state (context_id, updated_at) "
                     "SELECT id, now() - interval '1 hour' FROM core.context")
        # the finished rows: half COMPLETED/COMPLETED, half CANCELLED/CANCELLED, ages spread
        conn.execute(
            "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, "
            "retry_count, updated_at) "
            "SELECT 1000000 + g, s, s, g %% 4, now() - make_interval(secs => g %% 86400 + 7200) "
            "FROM generate_series(1, %s) g, "
            "LATERAL (SELECT CASE WHEN g %% 2 = 0 THEN 'COMPLETED' ELSE 'CANCELLED' END AS s) x",
            (total - STALE,))
        conn.execute("VACUUM ANALYZE ai.context_ai_state")


def make_stale_again(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE ai.context_ai_state SET retry_count = 0, rescanned_at = NULL "
                     "WHERE context_id < 1000000")


async def measure(url: str, rounds: int) -> tuple[list[float], str]:
    settings = load_settings(database_url=url, internal_secrets=SECRET, jwt_secret=JWT_SECRET,
                             rescan_enabled=False, data_dir=Path(tempfile.mkdtemp()))
    engine = create_engine(url, pool_size=settings.db_pool_size)
    try:
        times = []
        for _ in range(rounds):
            make_stale_again(url)
            client = NoopClient()
            loop = RescanLoop(engine, build_config(settings).core.rescan, client)
            started = time.perf_counter()
            report = await loop.run_round()
            times.append(time.perf_counter() - started)
            assert report.claimed == STALE and client.sent == STALE, report
        make_stale_again(url)
        async with engine.connect() as conn:
            plan = (await conn.execute(
                text("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statements().sql("claim")),
                expiry_params(build_config(settings).core.rescan))).scalars().all()
            await conn.rollback()
    finally:
        await engine.dispose()
    return times, "\n".join(plan)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    with scratch_database() as url:
        results = {}
        for total in SIZES:
            t0 = time.perf_counter()
            populate(url, total)
            print(f"populated {total:>9,} state rows ({STALE} stale) in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            times, plan = asyncio.run(measure(url, args.rounds))
            results[total] = (statistics.median(times), min(times), plan)

        print()
        print(f"{'state rows':>12} | {'round median (ms)':>18} | {'round min (ms)':>15}")
        for total, (median, best, _) in results.items():
            print(f"{total:>12,} | {median * 1000:>18.2f} | {best * 1000:>15.2f}")
        small, large = (results[s][0] for s in SIZES)
        ratio = large / small
        print(f"\nratio {SIZES[1]:,} / {SIZES[0]:,} = {ratio:.2f} (target <= 1.5): "
              f"{'OK' if ratio <= 1.5 else 'ABOVE TARGET'}")
        for total, (_, _, plan) in results.items():
            print(f"\nEXPLAIN (ANALYZE, BUFFERS) of the claim at {total:,} rows:\n{plan}")
            if "context_ai_state_rescan_idx" not in plan:
                print("!! the claim did not use the partial index")
                return 1
        return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
