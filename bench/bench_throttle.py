"""Throttled remote providers (issue 23): N notes through a model server that accepts R requests
per second (both endpoints together) and answers 429 + ``Retry-After`` above it.

Per behaviour profile of the fake server (``tests/support/fake_openai.py``: a plain
OpenAI-compatible server, then OpenAI, Azure OpenAI, TEI, vLLM, Ollama and a reasoning model):
a scratch database, ``pinlog presets load`` (the same function, through the throttle), N state
rows, an in-process ai runtime with the OpenAI-compatible provider and the llm judge pointed at
the fake, default settings otherwise; N process requests at once; the time until every job has
finished, the stages' final statuses and what the server saw (requests answered, 429s).

The floor is the time the rate itself imposes: every answered request needs a token, the
bucket starts full (R tokens), so ``(answered - R) / R`` seconds. The judge makes one call per
note, so with N = 200 and R = 10 the floor is about 20 s (200 ÷ 10); embeddings are batched.
Before issue 23 a throttle spent the three attempts of a stage in ~1.5 s and the notes then
waited for the processing expiry (10 min by default).

    python bench/bench_throttle.py [--n 200] [--rate 10] [--profiles throttle,openai,…]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root: tests.support

from pinlog.ai.presets import load_preset_file, load_presets  # noqa: E402
from pinlog.ai.runtime import AiRuntime  # noqa: E402
from pinlog.composition import build_config  # noqa: E402
from pinlog.contracts import ProcessRequest  # noqa: E402
from pinlog.db.engine import create_engine  # noqa: E402
from pinlog.settings import load_settings  # noqa: E402
from tests.support.fake_openai import API_KEY, FakeOpenAI  # noqa: E402

#: ``throttle``: the plain OpenAI-compatible fake; the others: the conformance profiles.
PROFILES = ("throttle", "openai", "azure-openai", "tei", "vllm", "ollama", "reasoning")
JUDGE_MODEL = "judge-model"
DIMENSION = 16
TEXTS = ["조용해서 책 읽기 좋은 카페", "친구들이랑 늦게까지 맥주", "비 오는 날 창가 자리",
         "부모님 모시고 가기 좋은 한정식", "혼밥하기 편한 국밥집", "강아지랑 산책하기 좋은 공원"]


def note(i: int) -> str:
    return f"{TEXTS[i % len(TEXTS)]} ({i}번째 메모)"


def _reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
            "WHERE schemaname IN ('core', 'ai') AND tablename <> 'alembic_version'").fetchall()
        conn.execute("TRUNCATE " + ", ".join(t[0] for t in tables) + " RESTART IDENTITY CASCADE")


async def run_profile(url: str, name: str, *, n: int, rate: float) -> dict[str, Any]:
    """One profile: presets load, N notes through the throttled fake; the figures."""
    _reset(url)
    fake = FakeOpenAI(profile=None if name == "throttle" else name, rate=rate,
                      api_key=API_KEY, models=(JUDGE_MODEL,), dimension=DIMENSION).start()
    env = {k.removeprefix("PINLOG_").lower(): v
           for k, v in fake.env(f"bench-{name}-{DIMENSION}-v1", chain=JUDGE_MODEL).items()}
    settings = load_settings(database_url=url, data_dir=Path(tempfile.mkdtemp()),
                             internal_secrets="x" * 32, jwt_secret="x" * 40,
                             rescan_enabled=False, candidate_floor=-1.0, **env)
    config = build_config(settings)
    engine = create_engine(url, pool_size=settings.db_pool_size)
    try:
        loaded = time.perf_counter()
        await load_presets(engine, load_preset_file(), config.ai.embedding, config.ai.batching,
                           config.ai.pipeline.retries)
        presets_s = time.perf_counter() - loaded
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                            [(i,) for i in range(1, n + 1)])
        runtime = AiRuntime(engine, config.ai)
        await runtime.start()
        answered_before = len(fake.embedding_calls) + fake.chat_calls
        throttled_before = fake.throttled
        started = time.perf_counter()
        try:
            for i in range(1, n + 1):
                status = await runtime.submit(ProcessRequest(context_id=i, user_id=1,
                                                             record_id=i, text=note(i)))
                assert status == 202, status
            await runtime.join()
            wall = time.perf_counter() - started
        finally:
            await runtime.stop()
    finally:
        await engine.dispose()
        fake.stop()
    with psycopg.connect(url) as conn:
        statuses = dict(conn.execute(
            "SELECT embedding_status || '/' || keyword_status, count(*) FROM ai.context_ai_state "
            "GROUP BY 1").fetchall())
        failed = conn.execute("SELECT count(*) FROM ai.context_ai_state WHERE "
                              "'FAILED' IN (embedding_status, keyword_status)").fetchone()[0]
    answered = len(fake.embedding_calls) + fake.chat_calls - answered_before
    return {"profile": name, "n": n, "rate": rate, "wall_s": wall, "presets_s": presets_s,
            "completed": statuses.get("COMPLETED/COMPLETED", 0), "failed": failed,
            "statuses": statuses, "answered": answered,
            "throttled": fake.throttled - throttled_before,
            "floor_s": max(0.0, (answered - rate) / rate)}


async def run(url: str, *, n: int, rate: float, profiles: tuple[str, ...],
              log: Any = print) -> dict[str, Any]:
    rows = []
    for name in profiles:
        log(f"throttle: {name}: {n} notes at {rate:g} requests/s")
        row = await run_profile(url, name, n=n, rate=rate)
        log(f"throttle: {name}: {row['completed']}/{n} COMPLETED, {row['failed']} FAILED, "
            f"{row['wall_s']:.1f} s (floor {row['floor_s']:.1f} s), {row['throttled']} × 429")
        rows.append(row)
    return {"n": n, "rate": rate, "profiles": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args()
    from scratch_db import scratch_database  # bench/scratch_db.py

    with scratch_database() as url:
        result = asyncio.run(run(url, n=args.n, rate=args.rate,
                                 profiles=tuple(p for p in args.profiles.split(",") if p)))
    print("| profile | notes | COMPLETED | FAILED | wall | floor | answered | 429s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["profiles"]:
        print(f"| {r['profile']} | {r['n']} | {r['completed']} | {r['failed']} | "
              f"{r['wall_s']:.1f} s | {r['floor_s']:.1f} s | {r['answered']} | {r['throttled']} |")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
