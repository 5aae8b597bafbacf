"""The issue-16 burst with the real model: 28 notes of 2,000 Korean characters plus 4 two-word
notes posted at once, default settings (PINLOG_EMBEDDING_TIMEOUT 60 s, batches of 32 texts /
8,000 characters). Reports when the short notes completed, when the long ones did, and how
many stages failed or timed out (before issue 16: 31 of 32 timed out, the short ones included).

Usage::

    .venv/bin/python bench/bench_long_notes.py [--long 28] [--short 4]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import psycopg

from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.ai.runtime import AiRuntime
from pinlog.contracts import ProcessRequest
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings
from pinlog.composition import build_config
from common import long_note  # bench/common.py
from scratch_db import scratch_database  # bench/scratch_db.py

SHORT = ["조용한 카페", "맛있는 국밥", "친구랑 산책", "작업하기 좋음", "비 오는 날", "야경 맛집"]


async def run(url: str, data_dir: Path, args: argparse.Namespace) -> dict:
    settings = load_settings(data_dir=data_dir, database_url=url, internal_secrets="x" * 32,
                             jwt_secret="x" * 40, rescan_enabled=False)
    engine = create_engine(url, pool_size=settings.db_pool_size)
    await upsert_presets(engine, load_preset_file(), build_config(settings).ai.embedding.build())
    total = args.long + args.short
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                        [(i,) for i in range(1, total + 1)])
    runtime = AiRuntime(engine, build_config(settings).ai)
    await runtime.start()
    done: dict[int, float] = {}
    started = time.perf_counter()
    original = runtime._run_job

    async def timed(request):
        result = await original(request)
        done[request.context_id] = time.perf_counter() - started
        return result

    runtime.queue._handler = timed  # observe each job's end (bench only)
    for i in range(1, total + 1):
        text = long_note(i) if i <= args.long else SHORT[(i - args.long - 1) % len(SHORT)]
        assert await runtime.submit(ProcessRequest(context_id=i, user_id=1, record_id=i,
                                                   text=text)) == 202
    await runtime.join()
    await runtime.stop()
    await engine.dispose()
    with psycopg.connect(url) as conn:
        statuses = conn.execute(
            "SELECT embedding_status, keyword_status, count(*) FROM ai.context_ai_state "
            "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
        timeouts = conn.execute("SELECT count(*) FROM ai.context_ai_event "
                                "WHERE reason LIKE '%timeout%'").fetchone()[0]
    return {"done": done, "statuses": statuses, "timeouts": timeouts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--long", type=int, default=28)
    parser.add_argument("--short", type=int, default=4)
    args = parser.parse_args()
    with scratch_database() as url:
        result = asyncio.run(run(url, Path(tempfile.mkdtemp(prefix="pinlog-bench-")), args))
    done = result["done"]
    long_times = [done[i] for i in range(1, args.long + 1)]
    short_times = [done[i] for i in range(args.long + 1, args.long + args.short + 1)]
    print(f"short notes ({args.short}) completed after: "
          + ", ".join(f"{t:.1f}" for t in sorted(short_times)) + " s")
    print(f"long notes ({args.long}): first {min(long_times):.1f} s, last {max(long_times):.1f} s")
    print("final statuses (embedding, keyword, rows):", result["statuses"])
    print("timeout events:", result["timeouts"])
    print("short notes done before the last long note:",
          sum(t < max(long_times) for t in short_times), "/", args.short)


if __name__ == "__main__":
    main()
