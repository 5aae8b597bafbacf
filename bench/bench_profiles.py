"""Switching embedding profiles under search load (SPEC §9.1, issue 24).

In one run, on an embedded PostgreSQL (or ``PINLOG_TEST_DATABASE_URL``'s server):

1. ``--notes`` notes (10 members) COMPLETED on profile A, 16 dimensions, in 50 topics (a note
   lies near its topic's axis; a query is a topic's axis), with their texts in core;
2. **idle**: ``--searches`` searches through the ai side (``AiRuntime.search``, fake query
   embeddings in-process, so the figure is the search path itself) — latency and answer of each;
3. **build**: ``pinlog profiles build B`` as a real subprocess (B: 12 dimensions, another topic
   order, from a fake OpenAI-compatible server in its own process, as a remote model), SIGKILLed when about half of the notes were
   sent to the model, then run again (it resumes); searches run back to back the whole time.
   Counted: answers that lost a record their idle answer had (target 0), latency (target p95
   ≤ 2 × idle p95), and the model calls: every note embedded once, except those of the batch in
   flight at the kill (target: duplicates ≤ one batch);
4. **activate** B (``pinlog.ai.profiles.activate_profile``, while searches keep running), then
   ``--searches`` more: every answer after the switch must come from B (its query embedded by
   B's provider, each embedded afresh: no recent query vector is reused; target: all) and
   none of the searches during the switch may be empty.

Usage::

    .venv/bin/python bench/bench_profiles.py [--notes 10000] [--searches 200] [--batch 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root: tests.*

from common import pct  # noqa: E402  bench/common.py
from scratch_db import scratch_database  # noqa: E402  bench/scratch_db.py

from pinlog.ai.profiles import activate_profile, drop_profile  # noqa: E402
from pinlog.ai.runtime import AiRuntime  # noqa: E402
from pinlog.composition import build_config  # noqa: E402
from pinlog.contracts import SearchRequest  # noqa: E402
from pinlog.db.engine import create_engine  # noqa: E402
from pinlog.settings import load_settings  # noqa: E402
from tests.fakes import FakeEmbeddingProvider, FakeJudge  # noqa: E402
from tests.support.fake_openai import FakeOpenAI  # noqa: E402

PROFILE_A, DIM_A = "bench-a-16-cosine-v1", 16
PROFILE_B, DIM_B = "bench-b-12-cosine-v1", 12
TOPICS, MEMBERS = 50, 10
SECRET = "bench-secret-0123456789"


def note(i: int) -> str:
    return f"bench note {i}: a place worth keeping"


def query(k: int) -> str:
    return f"topic {k}"


def member(i: int) -> int:
    """Note ``i``'s member: every member has notes of every topic."""
    return 1 + (i // TOPICS) % MEMBERS


def _vector(topic: int, dim: int, seed: int, noise: float = 0.05) -> list[float]:
    rng = np.random.default_rng(seed)
    v = np.zeros(dim)
    v[topic % dim] = 1.0
    v[(topic // dim + topic + 1) % dim] += 0.5 * ((topic // dim) % 3)
    v = v + rng.normal(0, noise, dim)
    return (v / np.linalg.norm(v)).tolist()


def vectors(profile: str, n: int) -> dict[str, list[float]]:
    """``text → vector`` of ``profile`` for the notes and the queries (B orders topics anew)."""
    dim = DIM_A if profile == PROFILE_A else DIM_B
    shift = 0 if profile == PROFILE_A else 7
    out = {note(i): _vector((i + shift) % TOPICS, dim, i) for i in range(1, n + 1)}
    out |= {query(k): _vector((k + shift) % TOPICS, dim, 0, noise=0.0) for k in range(TOPICS)}
    return out


def seed(url: str, n: int) -> None:
    """The notes in core (members, places, records, contexts) and their ai rows on A."""
    import hashlib

    from pinlog.ai.vectors import to_pgvector

    a = vectors(PROFILE_A, n)
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO core.member (id, external_ref) OVERRIDING SYSTEM VALUE "
                        "VALUES (%s, %s)", [(m, f"m{m}") for m in range(1, MEMBERS + 1)])
        rows = [(i, member(i)) for i in range(1, n + 1)]
        cur.executemany("INSERT INTO core.place (id, external_place_id, name, lat, lng) "
                        "OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, 37.5, 127.0)",
                        [(i, f"p{i}", f"place {i}") for i, _ in rows])
        cur.executemany("INSERT INTO core.record (id, member_id, place_id) OVERRIDING SYSTEM "
                        "VALUE VALUES (%s, %s, %s)", [(i, m, i) for i, m in rows])
        cur.executemany("INSERT INTO core.context (id, record_id, member_id, body) OVERRIDING "
                        "SYSTEM VALUE VALUES (%s, %s, %s, %s)", [(i, i, m, note(i)) for i, m in rows])
        cur.executemany("INSERT INTO ai.context_ai_state (context_id, embedding_status, "
                        "keyword_status) VALUES (%s, 'COMPLETED', 'COMPLETED')",
                        [(i,) for i, _ in rows])
        cur.executemany(
            "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
            "embedding_profile, text_sha256) VALUES (%s, %s, %s, %s::vector, %s, %s)",
            [(i, m, i, to_pgvector(np.asarray(a[note(i)])), PROFILE_A,
              hashlib.sha256(note(i).encode()).digest()) for i, m in rows])
        for pid in range(1, 6):  # presets of A (the build embeds them for B)
            cur.execute("INSERT INTO ai.keyword_preset (id, code, display_name, category, "
                        "description, examples) VALUES (%s, %s, %s, 'ATMOSPHERE', 'd', "
                        "ARRAY['e1', 'e2'])", (pid, f"P{pid}", f"preset {pid}"))
            cur.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                        "embedding) VALUES (%s, %s, %s::vector)",
                        (pid, PROFILE_A, to_pgvector(np.asarray(_vector(pid, DIM_A, pid)))))


def _model_process(vectors: dict[str, list[float]], dim: int, hold_texts: set[str],
                   conn: Any, hold_on: Any, entered: Any, release: Any) -> None:
    """The fake model server in its own process (as a remote model is), so its request
    handling never competes with the searches for this process's interpreter: sends its
    ``base_url``, holds the call carrying one of ``hold_texts`` while ``hold_on`` is set
    (``entered``; until ``release``); on ``"texts"`` sends the texts embedded since the last
    ask, on ``"stop"`` ends."""
    import threading

    model = FakeOpenAI(dimension=dim, vectors=vectors).start()
    model.hold_when = lambda texts: hold_on.is_set() and bool(hold_texts & set(texts))
    threading.Thread(target=lambda: (model.entered.wait(), entered.set()), daemon=True).start()
    threading.Thread(target=lambda: (release.wait(), model.release.set()), daemon=True).start()
    conn.send(model.base_url)
    sent = 0
    while conn.recv() == "texts":
        texts = list(model.embedded_texts)
        conn.send(texts[sent:])
        sent = len(texts)
    model.stop()


class ModelProcess:
    """Start/stop :func:`_model_process`; ``texts()`` ends it and returns what it embedded."""

    def __init__(self, vectors: dict[str, list[float]], dim: int, hold_texts: set[str]) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.hold_on, self.entered, self.release = ctx.Event(), ctx.Event(), ctx.Event()
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_model_process, daemon=True, args=(
            vectors, dim, hold_texts, child, self.hold_on, self.entered, self.release))
        self._process.start()
        self.base_url: str = self._conn.recv()

    def texts(self) -> list[str]:
        """The texts embedded since the last call."""
        self._conn.send("texts")
        texts: list[str] = self._conn.recv()
        return texts

    def stop(self) -> None:
        self.release.set()
        self._conn.send("stop")
        self._process.join(30)


class Searches:
    """Searches back to back through the runtime: latency, answer, which profile answered."""

    def __init__(self, runtime: AiRuntime, baseline: dict[tuple[int, int], list[int]], *,
                 fresh: bool = False) -> None:
        self.runtime, self.baseline, self.fresh = runtime, baseline, fresh
        self.latencies: list[float] = []
        self.answers = self.lost_answers = self.lost_results = self.empty = 0
        self.i = 0

    async def one(self) -> list[int]:
        member, k = 1 + self.i % MEMBERS, (self.i * 7) % TOPICS
        self.i += 1
        if self.fresh:  # no vector of an earlier search: this answer's profile embeds its query
            for searcher in self.runtime.searchers.values():
                searcher.vectors.clear()
        started = time.perf_counter()
        answer = await self.runtime.search(SearchRequest(
            user_id=member, query=query(k), limit=20, embedding_profile=PROFILE_A))
        self.latencies.append(time.perf_counter() - started)
        found = [h.record_id for h in answer.results]
        self.answers += 1
        self.empty += not found
        before = self.baseline.get((member, k))
        if before is not None:
            missing = set(before) - set(found)
            self.lost_answers += bool(missing)
            self.lost_results += len(missing)
        return found

    async def until(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await self.one()

    async def during(self, work: Any) -> Any:
        """Run searches back to back while ``work`` (an awaitable) runs; its result."""
        done = asyncio.Event()
        load = asyncio.create_task(self.until(done))
        try:
            return await work
        finally:
            done.set()
            await load


def _run_build(command: list[str], env: dict[str, str]) -> Any:
    """One ``pinlog profiles build`` run, in a thread (the caller's loop keeps searching).

    Raises:
        RuntimeError: the build failed (its last lines).
    """
    async def run() -> float:
        t0 = time.monotonic()
        done = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True,
                                       text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"build failed: {done.stderr[-2000:]}")
        return time.monotonic() - t0

    return run()


def _build_command(url: str, data_dir: Path, model: ModelProcess, batch: int,
                   max_rate: float) -> tuple[list[str], dict[str, str]]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PINLOG_")}
    env |= {"PINLOG_DATABASE_URL": url, "PINLOG_DATA_DIR": str(data_dir),
            "PINLOG_INTERNAL_SECRETS": SECRET, "PINLOG_JWT_SECRET": "j" * 40,
            "PINLOG_EMBEDDING_PROVIDER": "openai", "PINLOG_EMBEDDING_BASE_URL": model.base_url,
            "PINLOG_EMBEDDING_PROFILE": PROFILE_A, "PINLOG_EMBEDDING_DIMENSION": str(DIM_A),
            "PINLOG_NEXT_EMBEDDING_PROVIDER": "openai",
            "PINLOG_NEXT_EMBEDDING_BASE_URL": model.base_url,
            "PINLOG_NEXT_EMBEDDING_PROFILE": PROFILE_B,
            "PINLOG_NEXT_EMBEDDING_DIMENSION": str(DIM_B)}
    return ([sys.executable, "-m", "pinlog", "profiles", "build", PROFILE_B, "--batch-size",
             str(batch), "--max-rate", str(max_rate)], env)


async def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    n, data_dir = args.notes, Path(tempfile.mkdtemp(prefix="pinlog-bench-"))
    seed(url, n)
    half = {note(n // 2)}  # the build is SIGKILLed while this note's batch is on the model
    model = ModelProcess(vectors(PROFILE_B, n), DIM_B, half)
    settings = load_settings(
        data_dir=data_dir, database_url=url, internal_secrets=SECRET, jwt_secret="j" * 40,
        rescan_enabled=False, embedding_provider="openai", embedding_profile=PROFILE_A,
        embedding_dimension=DIM_A, embedding_base_url=model.base_url,
        next_embedding_provider="openai", next_embedding_profile=PROFILE_B,
        next_embedding_dimension=DIM_B, next_embedding_base_url=model.base_url)
    a = FakeEmbeddingProvider(PROFILE_A, DIM_A, vectors=vectors(PROFILE_A, 0))
    b = FakeEmbeddingProvider(PROFILE_B, DIM_B, vectors=vectors(PROFILE_B, 0))
    engine = create_engine(url, pool_size=6)
    runtime = AiRuntime(engine, build_config(settings).ai, provider=a, next_provider=b,
                        judge=FakeJudge(), profile_refresh=1.0)
    await runtime.start()
    out: dict[str, Any] = {"notes": n, "members": MEMBERS, "batch": args.batch,
                           "max_rate": args.max_rate}
    try:
        # 2. idle
        baseline: dict[tuple[int, int], list[int]] = {}
        idle = Searches(runtime, {})
        for _ in range(args.searches):
            i = idle.i
            baseline[(1 + i % MEMBERS, (i * 7) % TOPICS)] = await idle.one()
        command, env = _build_command(url, data_dir, model, args.batch, args.max_rate)

        async def plain_round(cmd: list[str]) -> dict[str, Any]:
            """Idle searches, then the same searches during a plain build (dropped after): both
            phases of a ratio see the same background load of the machine."""
            idle = Searches(runtime, baseline)
            for _ in range(args.searches):
                await idle.one()
            during = Searches(runtime, baseline)
            seconds = await during.during(_run_build(cmd, env))
            await drop_profile(engine, PROFILE_B)
            model.texts()
            return {"idle": idle.latencies, "build": during.latencies, "seconds": seconds,
                    "lost_answers": during.lost_answers, "empty": during.empty}

        # for information: the same build unpaced (as fast as the fake model and the database go)
        unpaced, _ = _build_command(url, data_dir, model, args.batch, 0)
        out["unpaced"] = await plain_round(unpaced)
        out["rounds"] = [await plain_round(command) for _ in range(max(0, args.rounds - 1))]

        idle = Searches(runtime, baseline)
        for _ in range(args.searches):
            await idle.one()
        out["idle"] = idle.latencies

        # 3. the build, killed half-way, then resumed, while searches run
        during = Searches(runtime, baseline)

        async def killed_and_resumed() -> tuple[float, float, int]:
            model.hold_on.set()
            t0 = time.monotonic()
            first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            await asyncio.to_thread(model.entered.wait, 600)
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait, 60)
            killed_at = time.monotonic() - t0
            with psycopg.connect(url) as conn:
                written = conn.execute("SELECT count(*) FROM ai.context_embedding_shadow WHERE "
                                       "embedding_profile = %s", (PROFILE_B,)).fetchone()[0]
            model.hold_on.clear()
            model.release.set()
            await _run_build(command, env)
            return time.monotonic() - t0, killed_at, written

        build_seconds, killed_at, written_before = await during.during(killed_and_resumed())
        calls = [t for t in model.texts() if t.startswith("bench note")]
        duplicates = len(calls) - len(set(calls))
        with psycopg.connect(url) as conn:
            built = conn.execute("SELECT count(*) FROM ai.context_embedding_shadow WHERE "
                                 "embedding_profile = %s", (PROFILE_B,)).fetchone()[0]
        out["build"] = {"latencies": during.latencies, "answers": during.answers,
                        "lost_answers": during.lost_answers, "lost_results": during.lost_results,
                        "empty": during.empty, "seconds": build_seconds, "killed_at": killed_at,
                        "written_before_kill": written_before, "built": built,
                        "model_texts": len(calls), "distinct_texts": len(set(calls)),
                        "duplicates": duplicates}

        # 4. activation under load, then every search from B
        switching = Searches(runtime, {})

        async def activate() -> tuple[Any, float]:
            t0 = time.monotonic()
            report = await activate_profile(engine, PROFILE_B, current=(PROFILE_A, DIM_A))
            seconds = time.monotonic() - t0
            for _ in range(3):  # a few searches after the commit, then stop the load
                await switching.one()
            return report, seconds

        report, activation = await switching.during(activate())
        a_before, b_before = a.kinds.count("query"), b.kinds.count("query")
        # every query embedded again, so the providers' call counts say which profile answered
        # each search (the recent query vectors would answer a repeated text without a call)
        after = Searches(runtime, {}, fresh=True)
        for _ in range(args.searches):
            await after.one()
        out["activate"] = {"seconds": activation, "copied": report.copied, "kept": report.kept,
                           "during_answers": switching.answers, "during_empty": switching.empty,
                           "after_answers": after.answers, "after_empty": after.empty,
                           "after_by_a": a.kinds.count("query") - a_before,
                           "after_by_b": b.kinds.count("query") - b_before,
                           "latencies": after.latencies}
    finally:
        await runtime.stop()
        await engine.dispose()
        model.stop()
    return out


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The figures and targets of a run: the p95 ratio is the median over the paired rounds
    (the killed-and-resumed build is one of them)."""
    idle_p95, build_p95 = pct(r["idle"], 0.95), pct(r["build"]["latencies"], 0.95)
    b, act = r["build"], r["activate"]
    ratios = [pct(x["build"], 0.95) / pct(x["idle"], 0.95) for x in r.get("rounds", [])]
    ratios.append(build_p95 / idle_p95)
    ratio = statistics.median(ratios)
    lost = b["lost_answers"] + sum(x["lost_answers"] for x in r.get("rounds", []))
    empty = b["empty"] + sum(x["empty"] for x in r.get("rounds", []))
    return {
        "idle_p50": statistics.median(r["idle"]), "idle_p95": idle_p95,
        "build_p50": statistics.median(b["latencies"]), "build_p95": build_p95,
        "ratios": ratios, "ratio": ratio, "ratio_ok": ratio <= 2,
        "lost": lost, "lost_ok": lost == 0 and empty == 0,
        "duplicates_ok": b["duplicates"] <= r["batch"] and b["distinct_texts"] == r["notes"]
        and b["built"] == r["notes"],
        "switch_ok": act["after_by_b"] == act["after_answers"] and act["after_by_a"] == 0
        and act["during_empty"] == 0 and act["after_empty"] == 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256, help="the build's batch size")
    parser.add_argument("--rounds", type=int, default=3,
                        help="paired idle/build rounds (the last one is killed and resumed)")
    parser.add_argument("--max-rate", type=float, default=1000.0,
                        help="the build's --max-rate, vectors/s (an unpaced round is shown too)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args()
    with scratch_database() as url:
        result = asyncio.run(run(url, args))
    if args.json:
        print(json.dumps(result))
        return
    s, b, act = summary(result), result["build"], result["activate"]
    ms = 1000.0
    print(f"{result['notes']:,} notes of {MEMBERS} members on {PROFILE_A}; build {PROFILE_B} "
          f"(batches of {result['batch']}, --max-rate {result['max_rate']:g}) while searches run")
    print(f"search idle: p50 {s['idle_p50'] * ms:.1f} ms, p95 {s['idle_p95'] * ms:.1f} ms")
    print(f"search during the build: p50 {s['build_p50'] * ms:.1f} ms, p95 "
          f"{s['build_p95'] * ms:.1f} ms; p95 during / idle per round "
          f"{', '.join(f'{x:.2f}' for x in s['ratios'])}: median {s['ratio']:.2f} (target ≤ 2: "
          f"{'OK' if s['ratio_ok'] else 'ABOVE TARGET'})")
    un = result["unpaced"]
    print(f"unpaced build (for information): {un['seconds']:.1f} s, p95 during / idle "
          f"{pct(un['build'], .95) / pct(un['idle'], .95):.2f}")
    print(f"answers during the build: {b['answers']}, that lost a record of their idle answer: "
          f"{b['lost_answers']} ({b['lost_results']} records), empty: {b['empty']} (target 0: "
          f"{'OK' if s['lost_ok'] else 'FAILED'})")
    print(f"build: {b['built']:,} vectors in {b['seconds']:.1f} s (SIGKILLed after "
          f"{b['killed_at']:.1f} s with {b['written_before_kill']:,} written, then resumed); "
          f"model texts {b['model_texts']:,} for {b['distinct_texts']:,} notes, duplicates "
          f"{b['duplicates']} (target ≤ one batch of {result['batch']}: "
          f"{'OK' if s['duplicates_ok'] else 'FAILED'})")
    print(f"activation: {act['copied']:,} vectors switched, {act['kept']:,} kept, in "
          f"{act['seconds'] * ms:.0f} ms; searches during it {act['during_answers']} "
          f"(empty {act['during_empty']}); after it {act['after_answers']}: embedded by B "
          f"{act['after_by_b']}, by A {act['after_by_a']} (target: all B: "
          f"{'OK' if s['switch_ok'] else 'FAILED'})")


if __name__ == "__main__":
    main()
