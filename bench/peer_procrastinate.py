"""Orchestration overhead: our state machine vs the same two-stage flow on procrastinate
(issue 15 item 2). Target: ours ≥ 1.5 × procrastinate (contexts/s).

Both sides get the same constant-time fake model — :class:`ConstantTimeProvider`, ``--delay``
(2 ms) per ``embed`` call, in process at the :class:`~pinlog.ai.ports.EmbeddingProvider`
Protocol, no HTTP — the same similarity judge (:func:`pinlog.ai.judges.build_judge`), the same
preset snapshot and candidate search, the same PostgreSQL database, the same concurrency and
the same DB pool size. Per round, with fresh context ids:

* **ours**: state rows inserted (PENDING/PENDING, as core does on create), then one
  ``POST /internal/v1/context/process`` per context to the real ai app (ASGI transport, secret
  check, work queue, pipeline: pre-check, guarded starts, guarded saves with event rows). The
  micro-batcher is set to batch size 1 / wait 0, so each context is one 2 ms model call on both
  sides (a bigger batch would let ours pay 2 ms for many texts: not orchestration). Jobs that
  wait in the work queue are taken together (``PINLOG_PROCESS_BATCH_SIZE``, default 64) through
  the batch path — one claim and one write per stage for all of them, the same guards and events
  per context — as under any burst; a job alone runs the single-context job.
* **peer** (procrastinate 3, one job per stage): state rows inserted, one ``embed`` job
  deferred per context; the ``embed`` job embeds, writes the embedding row and sets
  ``embedding_status = 'COMPLETED'`` in one transaction, then defers the ``keyword`` job, which
  reads the stored vector, selects candidates, judges, and in one transaction replaces the
  keyword rows, upserts the analysis row and sets ``keyword_status = 'COMPLETED'``. The same
  result rows as ours; no guards, no event rows (procrastinate's job table is its state).

A warm-up round of each side (n/5 contexts) is not counted. Rate: contexts from the first
insert until every state row of the round is COMPLETED/COMPLETED, both sides observed by the
same polling loop. Rounds alternate ours/peer (paired); the ratio is taken per round.

    .venv/bin/python bench/peer_procrastinate.py [--n 400] [--rounds 3] [--concurrency 16]
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
from sqlalchemy import text as sql

from pinlog.ai.candidates import select_candidates
from pinlog.ai.judges import build_judge
from pinlog.ai.ports import EmbedKind, Judge
from pinlog.ai.presets import load_preset_file, load_snapshot, upsert_presets
from pinlog.ai.vectors import to_pgvector
from pinlog.app import create_app
from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from pinlog.db.engine import create_engine
from pinlog.settings import Settings, load_settings
from pinlog.composition import build_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import side_by_side_parser  # noqa: E402  bench/common.py
from scratch_db import scratch_database  # noqa: E402  bench/scratch_db.py
from serve_harness import note_texts  # noqa: E402  bench/serve_harness.py

SECRET = "bench-secret-0123456789"
PROFILE = "bench-fake-16-cosine-v1"
DIMENSION = 16


class ConstantTimeProvider:
    """A fake embedding model at the Protocol: every ``embed`` call takes ``delay`` seconds
    (``asyncio.sleep``: no CPU, so only the orchestration competes for it) and returns
    deterministic unit vectors ``(len(texts), 16)`` from a hash of each text. Counts calls."""

    def __init__(self, delay: float = 0.002) -> None:
        self.profile = PROFILE
        self.dimension = DIMENSION
        self.delay = delay
        self.calls = 0

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        self.calls += 1
        await asyncio.sleep(self.delay)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "big")
            v = np.random.default_rng(seed).standard_normal(DIMENSION)
            out[i] = v / np.linalg.norm(v)
        return out


def bench_settings(url: str, concurrency: int, pool: int, n: int) -> Settings:
    return load_settings(
        data_dir=Path(tempfile.mkdtemp(prefix="pinlog-bench-")), database_url=url,
        internal_secrets=SECRET, jwt_secret="x" * 40, rescan_enabled=False,
        work_queue_size=n + 10, worker_concurrency=concurrency, db_pool_size=pool,
        embedding_profile=PROFILE, embedding_dimension=DIMENSION,
        embedding_batch_size=1, embedding_batch_wait_ms=0)


def insert_states(url: str, ids: list[int]) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO ai.context_ai_state (context_id) VALUES (%s)",
                        [(i,) for i in ids])


async def wait_completed(url: str, first: int, n: int, timeout: float = 600) -> None:
    """Poll (every 10 ms) until the ``n`` state rows from ``first`` are COMPLETED/COMPLETED."""
    deadline = time.monotonic() + timeout
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            cur = await conn.execute(
                "SELECT count(*) FROM ai.context_ai_state WHERE context_id BETWEEN %s AND %s "
                "AND embedding_status = 'COMPLETED' AND keyword_status = 'COMPLETED'",
                (first, first + n - 1))
            if (await cur.fetchone())[0] == n:  # type: ignore[index]
                return
            await asyncio.sleep(0.01)
    raise TimeoutError("contexts did not complete")


async def run_ours(url: str, settings: Settings, provider: ConstantTimeProvider, judge: Judge,
                   first: int, texts: list[str], app: Any) -> float:
    """Contexts/s through the real ai app (ASGI POSTs to the process route)."""
    ids = list(range(first, first + len(texts)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://ai") as client:
        started = time.perf_counter()
        insert_states(url, ids)
        for cid, t in zip(ids, texts, strict=True):
            r = await client.post(PROCESS_PATH, headers={SECRET_HEADER: SECRET}, json={
                "contextId": cid, "userId": 1 + cid % 7, "recordId": cid, "text": t})
            if r.status_code != 202:
                raise RuntimeError(f"process answered {r.status_code}")
        await wait_completed(url, first, len(texts))
        return len(texts) / (time.perf_counter() - started)


class Peer:
    """The two-stage flow on procrastinate (one job per stage), same result writes."""

    def __init__(self, url: str, settings: Settings, provider: ConstantTimeProvider,
                 judge: Judge) -> None:
        import procrastinate

        self.url = url
        self.settings = settings
        self.provider = provider
        self.judge = judge
        self.engine = create_engine(url, pool_size=settings.db_pool_size)
        self.calibration = build_config(settings).ai.calibration
        self.snapshot: Any = None
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=url,
            min_size=1, max_size=settings.db_pool_size))
        self.embed_task = self.app.task(name="embed", queue="embed")(self._embed)
        self.keyword_task = self.app.task(name="keyword", queue="keyword")(self._keyword)

    async def _embed(self, context_id: int, user_id: int, record_id: int, text: str) -> None:
        vector = (await self.provider.embed([text], "passage"))[0]
        sha = hashlib.sha256(text.encode("utf-8")).digest()
        async with self.engine.begin() as conn:
            await conn.execute(sql(
                "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
                "embedding_profile, text_sha256, updated_at) VALUES (:cid, :uid, :rid, "
                "CAST(:v AS vector), :p, :sha, now()) ON CONFLICT (context_id) DO UPDATE SET "
                "embedding = EXCLUDED.embedding, embedding_profile = EXCLUDED.embedding_profile, "
                "text_sha256 = EXCLUDED.text_sha256, updated_at = now()"),
                {"cid": context_id, "uid": user_id, "rid": record_id, "v": to_pgvector(vector),
                 "p": PROFILE, "sha": sha})
            await conn.execute(sql(
                "UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED', updated_at = now() "
                "WHERE context_id = :cid"), {"cid": context_id})
        await self.keyword_task.defer_async(context_id=context_id, text=text)

    async def _keyword(self, context_id: int, text: str) -> None:
        async with self.engine.connect() as conn:
            raw = (await conn.execute(sql(
                "SELECT embedding::text FROM ai.context_embedding WHERE context_id = :cid"),
                {"cid": context_id})).scalar_one()
            if self.snapshot is None:
                self.snapshot = await load_snapshot(conn, PROFILE)
        vector = np.asarray(json.loads(raw), dtype=np.float32)
        candidates = select_candidates(vector, self.snapshot,
                                       top_k=self.settings.candidate_top_k,
                                       floor=self.calibration.candidate_floor, text=text)
        answer = await self.judge.judge(text, candidates) if candidates else None
        allowed = {c.preset.id for c in candidates}
        picks = [p for p in (answer.picks if answer else ()) if p.keyword_id in allowed]
        async with self.engine.begin() as conn:
            await conn.execute(sql("DELETE FROM ai.context_keyword WHERE context_id = :cid"),
                               {"cid": context_id})
            if picks:
                await conn.execute(sql(
                    "INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, "
                    "preset_version) SELECT :cid, k, c, :ver FROM unnest(CAST(:ks AS integer[]), "
                    "CAST(:cs AS numeric[])) AS x(k, c)"),
                    {"cid": context_id, "ver": self.snapshot.version,
                     "ks": [p.keyword_id for p in picks],
                     "cs": [None if p.confidence is None else round(float(p.confidence), 3)
                            for p in picks]})
            await conn.execute(sql(
                "INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                "unmatched_concepts, model_profile, evidence, updated_at) VALUES (:cid, :ver, "
                "CAST(:u AS jsonb), :mp, CAST(:ev AS jsonb), now()) ON CONFLICT (context_id) DO "
                "UPDATE SET preset_version = EXCLUDED.preset_version, unmatched_concepts = "
                "EXCLUDED.unmatched_concepts, model_profile = EXCLUDED.model_profile, evidence = "
                "EXCLUDED.evidence, updated_at = now()"),
                {"cid": context_id, "ver": self.snapshot.version,
                 "u": json.dumps(list(answer.unmatched_concepts) if answer else []),
                 "mp": (answer.model_profile if answer else "") or "none",
                 "ev": json.dumps([dict(e) for e in answer.evidence] if answer else [],
                                  ensure_ascii=False)})
            await conn.execute(sql(
                "UPDATE ai.context_ai_state SET keyword_status = 'COMPLETED', updated_at = now() "
                "WHERE context_id = :cid"), {"cid": context_id})

    async def run(self, first: int, texts: list[str]) -> float:
        """Contexts/s: state rows, one deferred ``embed`` job per context, workers until all
        COMPLETED/COMPLETED."""
        ids = list(range(first, first + len(texts)))
        worker = asyncio.create_task(self.app.run_worker_async(
            concurrency=self.settings.worker_concurrency, install_signal_handlers=False,
            fetch_job_polling_interval=0.5, delete_jobs="always"))
        try:
            started = time.perf_counter()
            insert_states(self.url, ids)
            for cid, t in zip(ids, texts, strict=True):
                await self.embed_task.defer_async(context_id=cid, user_id=1 + cid % 7,
                                                  record_id=cid, text=t)
            await wait_completed(self.url, first, len(texts))
            return len(texts) / (time.perf_counter() - started)
        finally:
            worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting the worker down
                pass


async def compare(url: str, *, n: int, rounds: int, concurrency: int, pool: int,
                  delay: float, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Paired rounds ours/peer on the database at ``url``; returns per-round rates and ratios."""
    settings = bench_settings(url, concurrency, pool, n)
    provider = ConstantTimeProvider(delay)
    engine = create_engine(url, pool_size=2)
    try:
        await upsert_presets(engine, load_preset_file(), provider)
    finally:
        await engine.dispose()
    judge = build_judge(build_config(settings).ai.judge, provider, build_config(settings).ai.calibration)
    peer = Peer(url, settings, provider, judge)
    warm = max(10, n // 5)
    texts_all = note_texts(n * rounds * 2 + 2 * warm)
    out: dict[str, list[float]] = {"ours": [], "peer": [], "ratio": []}
    app = create_app(settings, components=("ai",), database_url=url,
                     ai_kwargs={"provider": provider, "judge": judge})
    async with peer.app.open_async():
        await peer.app.schema_manager.apply_schema_async()
        async with app.router.lifespan_context(app):
            # warm-up, not counted: analyser and snapshot loads, pool connections
            last = 2 * rounds * n
            await run_ours(url, settings, provider, judge, 1 + last, texts_all[last:last + warm],
                           app)
            await peer.run(1 + last + warm, texts_all[last + warm:last + 2 * warm])
            for r in range(rounds):
                base = 1 + 2 * r * n
                ours = await run_ours(url, settings, provider, judge, base,
                                      texts_all[2 * r * n:(2 * r + 1) * n], app)
                theirs = await peer.run(base + n, texts_all[(2 * r + 1) * n:(2 * r + 2) * n])
                out["ours"].append(ours)
                out["peer"].append(theirs)
                out["ratio"].append(ours / theirs)
                log(f"  round {r + 1}: ours {ours:.0f} ctx/s, procrastinate {theirs:.0f} ctx/s, "
                    f"ratio {ours / theirs:.2f}")
    await peer.engine.dispose()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE embedding_status = 'COMPLETED' AND "
            "keyword_status = 'COMPLETED') FROM ai.context_ai_state").fetchone()
        kw = conn.execute("SELECT count(DISTINCT context_id) FROM ai.context_keyword").fetchone()
    return {**out, "rows": rows[0], "completed": rows[1], "with_keywords": kw[0],
            "model_calls": provider.calls}


def main() -> int:
    parser = side_by_side_parser(__doc__, n=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.002, help="seconds per model call")
    args = parser.parse_args()
    with scratch_database() as url:
        result = asyncio.run(compare(url, n=args.n, rounds=args.rounds,
                                     concurrency=args.concurrency, pool=args.pool,
                                     delay=args.delay))
    ratio = statistics.median(result["ratio"])
    print(f"median: ours {statistics.median(result['ours']):.0f} ctx/s, procrastinate "
          f"{statistics.median(result['peer']):.0f} ctx/s, ratio {ratio:.2f} (target >= 1.5: "
          f"{'OK' if ratio >= 1.5 else 'BELOW TARGET'}); {result['completed']}/{result['rows']} "
          f"COMPLETED, {result['with_keywords']} with keywords")
    return 0


if __name__ == "__main__":
    sys.exit(main())
