"""Chaos run (issue 13 item 8): does any context get lost or duplicated when the server is
SIGKILLed at random moments and the database goes away once?

Imports N contexts (default 2,000) through the public API into a running `pinlog serve` (real
PostgreSQL: an embedded server of a temporary data dir; model: a local OpenAI-compatible server
that counts calls — bench/fake_model.py — with the llm judge, so both stages call a model).
While importing, SIGKILLs and restarts the server K times (default 10) at random moments and
stops and starts the database once. Then waits for every context to be final and checks:

* lost: a context the API confirmed (201) that is missing, a context without a state row, or a
  state row that is not final (PENDING/PROCESSING) by the deadline;
* duplicates: embedding rows ≠ 1 per COMPLETED context, more than one context per record;
* model calls per stage: total and max per context (re-calls after a kill are expected; they
  are reported, not failures).

Exit 1 on any loss or duplicate. The rescan interval stays at its default (5 min); the expiries
are shortened (--pending-expiry, --processing-expiry) so the run is short.

    .venv/bin/python bench/chaos.py [--contexts 2000] [--kills 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_model import CountingModel  # noqa: E402
from serve_harness import (  # noqa: E402
    Serve,
    free_port,
    make_member,
    note_texts,
    serve_env,
    token_for,
)


def pinlog(args: list[str], env: dict[str, str], timeout: float = 300) -> str:
    result = subprocess.run([sys.executable, "-m", "pinlog", *args], env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"pinlog {' '.join(args)}: {result.stderr[-1500:]}")
    return result.stdout.strip()


class Importer:
    """Posts every text until the API confirms it (201), or says the record exists (409: an
    earlier POST committed but its answer was lost in a kill)."""

    def __init__(self, texts: list[str], token: str) -> None:
        self.texts = texts
        self.token = token
        self.url = ""
        self.confirmed: dict[int, int] = {}  # text index → context id
        self.existing: set[int] = set()       # text indexes answered 409 RECORD_EXISTS
        self.retries = 0

    async def run(self, concurrency: int = 8) -> None:
        todo = iter(range(len(self.texts)))
        async with httpx.AsyncClient(timeout=10, headers={
                "Authorization": f"Bearer {self.token}"}) as client:
            async def worker() -> None:
                for i in todo:
                    while True:
                        try:
                            r = await client.post(f"{self.url}/v1/records", json={
                                "place": {"externalPlaceId": f"chaos-{i}", "name": f"place {i}",
                                          "lat": 37.5, "lng": 127.0}, "text": self.texts[i]})
                        except httpx.HTTPError:
                            r = None
                        if r is not None and r.status_code == 201:
                            self.confirmed[i] = r.json()["contextId"]
                            break
                        if r is not None and r.status_code == 409:
                            self.existing.add(i)
                            break
                        self.retries += 1
                        await asyncio.sleep(0.2)

            await asyncio.gather(*(worker() for _ in range(concurrency)))


async def chaos(args: argparse.Namespace, env: dict[str, str], db_env: dict[str, str],
                importer: Importer, log: Path) -> tuple[int, float]:
    rng = random.Random(args.seed)
    server = Serve(env, log)
    await asyncio.to_thread(server.wait_ready)
    importer.url = server.url
    importing = asyncio.create_task(importer.run())
    kills, db_bounced = 0, False
    db_at = rng.randrange(max(1, args.kills))
    for k in range(args.kills):
        await asyncio.sleep(rng.uniform(0.3, args.max_gap))
        if importing.done():
            break
        server.kill()
        kills += 1
        if k == db_at:  # the database goes away once, while the server is down and up again
            server = Serve(env, log)
            await asyncio.to_thread(server.wait_ready)
            await asyncio.to_thread(pinlog, ["db", "stop", "--force"], db_env)  # under serve
            await asyncio.sleep(rng.uniform(1, 3))
            await asyncio.to_thread(pinlog, ["db", "start"], db_env)
            db_bounced = True
            continue
        server = Serve(env, log)
        await asyncio.to_thread(server.wait_ready)
    if not db_bounced:
        await asyncio.to_thread(pinlog, ["db", "stop", "--force"], db_env)  # under serve
        await asyncio.sleep(rng.uniform(1, 3))
        await asyncio.to_thread(pinlog, ["db", "start"], db_env)
    await importing
    done_at = time.monotonic()
    box["server"] = server
    return kills, done_at


box: dict[str, Serve] = {}


def unfinished(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT count(*) FROM ai.context_ai_state WHERE embedding_status IN "
        "('PENDING','PROCESSING') OR keyword_status IN ('PENDING','PROCESSING')").fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-gap", type=float, default=3.0,
                        help="longest pause (s) between two kills")
    parser.add_argument("--pending-expiry", type=int, default=10)
    parser.add_argument("--processing-expiry", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pinlog-chaos-"))
    model = CountingModel().start()
    db_env = serve_env("", work / "data", 0)
    db_env.pop("PINLOG_DATABASE_URL")
    started = time.monotonic()
    try:
        pinlog(["db", "start"], db_env)
        db_url = pinlog(["db", "url"], db_env)
        env = serve_env(db_url, work / "data", free_port(), **model.env(),
                        PINLOG_PENDING_EXPIRY=str(args.pending_expiry),
                        PINLOG_PROCESSING_EXPIRY=str(args.processing_expiry),
                        PINLOG_EMBEDDING_TIMEOUT="3", PINLOG_LLM_TIMEOUT="3")
        pinlog(["migrate"], env)
        pinlog(["presets", "load"], env)
        texts = note_texts(args.contexts)
        importer = Importer(texts, token_for(db_url, make_member(db_url, "chaos")))
        kills, imported_at = asyncio.run(chaos(args, env, db_env, importer, work / "serve.log"))
        deadline = time.monotonic() + 4 * args.processing_expiry + 180
        with psycopg.connect(db_url, autocommit=True) as conn:
            while unfinished(conn) and time.monotonic() < deadline:
                time.sleep(0.5)
            final_after = time.monotonic() - imported_at
            report = check(conn, importer, texts, model)
        box["server"].terminate()
    finally:
        model.stop()
        subprocess.run([sys.executable, "-m", "pinlog", "db", "stop"], env=db_env,
                       capture_output=True, timeout=60)
    print(f"chaos: contexts {args.contexts}, kills {kills} (SIGKILL + restart), database "
          f"stopped and started once; seed {args.seed}; interval 300 s (default), expiries "
          f"PENDING {args.pending_expiry} s / PROCESSING {args.processing_expiry} s")
    print(f"import: confirmed 201 {len(importer.confirmed)}, answered 409 after a lost answer "
          f"{len(importer.existing)}, POST retries {importer.retries}; all final "
          f"{final_after:.1f} s after the import ended; run {time.monotonic() - started:.0f} s")
    for line in report["lines"]:
        print(line)
    bad = report["lost"] + report["duplicates"]
    print("RESULT:", "OK (no loss, no duplicate)" if not bad else f"FAILED ({bad} problems)")
    return 1 if bad else 0


def check(conn: psycopg.Connection, importer: Importer, texts: list[str],
          model: CountingModel) -> dict:
    rows = conn.execute(
        "SELECT c.id, c.body, s.embedding_status, s.keyword_status, s.retry_count, "
        "(SELECT count(*) FROM ai.context_embedding e WHERE e.context_id = c.id) "
        "FROM core.context c LEFT JOIN ai.context_ai_state s ON s.context_id = c.id").fetchall()
    by_id = {r[0]: r for r in rows}
    missing = [cid for cid in importer.confirmed.values() if cid not in by_id]
    no_state = [r[0] for r in rows if r[2] is None]
    not_final = [r[0] for r in rows if r[2] in ("PENDING", "PROCESSING")
                 or r[3] in ("PENDING", "PROCESSING")]
    emb_bad = [r[0] for r in rows if r[2] == "COMPLETED" and r[5] != 1]
    per_record = conn.execute(
        "SELECT count(*) FROM (SELECT record_id FROM core.context GROUP BY record_id "
        "HAVING count(*) > 1) t").fetchone()[0]
    texts_in_db = {r[1] for r in rows}
    unexpected = len(texts_in_db - set(texts))
    statuses: dict[str, int] = {}
    for r in rows:
        key = f"{r[2]}/{r[3]}"
        statuses[key] = statuses.get(key, 0) + 1
    emb_calls = [model.embedded.get(t, 0) for t in texts_in_db]
    judge_calls = [model.judged.get(t, 0) for t in texts_in_db]
    retries = [r[4] or 0 for r in rows]
    failed = sum(1 for r in rows if "FAILED" in (r[2], r[3]))
    lost = len(missing) + len(no_state) + len(not_final)
    duplicates = len(emb_bad) + per_record + unexpected
    lines = [
        f"contexts in the database {len(rows)} (expected {len(texts)}); states "
        + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        f"lost: confirmed but missing {len(missing)}, no state row {len(no_state)}, not final "
        f"{len(not_final)}; final but with a FAILED stage (retries exhausted; not a loss, "
        f"reported) {failed}",
        f"duplicates: COMPLETED with embedding rows != 1 {len(emb_bad)}, records with > 1 "
        f"context {per_record}, unknown texts {unexpected}",
        f"model calls: embedding total {sum(emb_calls)} (max per context "
        f"{max(emb_calls, default=0)}), judge total {sum(judge_calls)} (max per context "
        f"{max(judge_calls, default=0)}); rescan retries spent: total {sum(retries)}, max "
        f"{max(retries, default=0)}",
    ]
    return {"lost": lost, "duplicates": duplicates, "lines": lines}


if __name__ == "__main__":
    raise SystemExit(main())
