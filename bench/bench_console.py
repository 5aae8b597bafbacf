"""Benchmark: the operator console's overview render at 1M state rows (issue 29).

A scratch database with ``total`` state rows (96 % COMPLETED, 2 % CANCELLED, 1 % FAILED with
4 reasons, 1 % unfinished), their core rows (one member, records, contexts) and the events of
the last hour (one completion per minute per 1,000 rows) plus older history. The app (core only,
console on, in this process through httpx's ASGI transport) then renders the overview page and
its JSON ``rounds`` times each while a writer changes 50 statuses between renders (so the
maintained counts always have fresh deltas to read). Reported: p50/p95/max of the page and the
JSON, and for comparison the full count the counts replace (``rows_per_stage_status``, one pass
over the table) — with ``EXPLAIN`` of the overview's reads.

Run alone: ``python bench/bench_console.py [--total 1000000] [--rounds 200]`` (uses
PINLOG_TEST_DATABASE_URL's server when set, else a throw-away embedded PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ADMIN = "bench-console-admin-token-0123"


def populate(url: str, total: int) -> None:
    """``total`` state rows with their core rows and events (see the module docstring)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE ai.context_ai_state, ai.context_ai_event, core.context, "
                     "core.record, core.place, core.member RESTART IDENTITY CASCADE")
        conn.execute("INSERT INTO core.member (external_ref) VALUES ('bench')")
        conn.execute("INSERT INTO core.place (external_place_id, name, lat, lng) "
                     "SELECT 'p' || g, 'place ' || g, 37.5, 127.0 FROM generate_series(1, %s) g",
                     (total,))
        conn.execute("INSERT INTO core.record (member_id, place_id) SELECT 1, id FROM core.place")
        conn.execute("INSERT INTO core.context (record_id, member_id, body) "
                     "SELECT id, 1, 'note ' || id FROM core.record")
        conn.execute("""
INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, retry_count,
                                 updated_at, last_error, last_error_at)
SELECT id, e, k, (id % 4)::int, now() - make_interval(secs => (id % 86400) + 60),
       CASE WHEN e = 'FAILED' OR k = 'FAILED'
            THEN 'embedding permanent: ' || (ARRAY['upstream answered 400', 'wrong vector length',
                 'input over the model limit', 'judge output invalid'])[1 + (id / 100) % 4] END,
       CASE WHEN e = 'FAILED' OR k = 'FAILED' THEN now() END
FROM core.context,
LATERAL (SELECT CASE WHEN id % 100 = 0 THEN 'FAILED'
                     WHEN id % 100 = 1 THEN 'PENDING'
                     WHEN id % 100 IN (2, 3) THEN 'CANCELLED' ELSE 'COMPLETED' END AS e) a,
LATERAL (SELECT e AS k) b""")
        # history: two events per row a day ago, and the last hour's completions
        conn.execute("INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, "
                     "actor, at) SELECT id, 'embedding', 'PROCESSING', 'COMPLETED', 'ai', "
                     "now() - interval '1 day' FROM core.context")
        conn.execute("INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, "
                     "actor, at) SELECT g, 'keyword', 'PROCESSING', 'COMPLETED', 'ai', "
                     "now() - make_interval(secs => g %% 3600) "
                     "FROM generate_series(1, %s) g", (max(60, total // 1000 * 60),))
        conn.execute("VACUUM ANALYZE ai.context_ai_state")
        conn.execute("VACUUM ANALYZE ai.context_ai_event")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(url: str, rounds: int, total: int) -> dict[str, Any]:
    import httpx

    from pinlog.app import create_app
    from pinlog.settings import load_settings
    from serve_harness import JWT_SECRET, SECRET  # bench/serve_harness.py

    settings = load_settings(database_url=url, internal_secrets=SECRET, jwt_secret=JWT_SECRET,
                             rescan_enabled=False, data_dir=Path(tempfile.mkdtemp()),
                             console_admin_token=ADMIN, ai_base_url="http://127.0.0.1:9")
    app = create_app(settings, components=("core",), database_url=url)
    writer = psycopg.connect(url, autocommit=True)
    page_s: list[float] = []
    json_s: list[float] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
            form = await http.get("/console/login")
            nonce = re.search(r'name="nonce" value="([0-9a-f]+)"', form.text).group(1)  # type: ignore[union-attr]
            await http.post("/console/login", data={"nonce": nonce, "token": ADMIN})
            for i in range(rounds):
                low = 1 + (i * 50) % max(1, total - 50)
                writer.execute("UPDATE ai.context_ai_state SET keyword_status = "
                               "CASE keyword_status WHEN 'COMPLETED' THEN 'PENDING' ELSE keyword_status END "
                               "WHERE context_id BETWEEN %s AND %s", (low, low + 49))
                t0 = time.perf_counter()
                answer = await http.get("/console")
                page_s.append(time.perf_counter() - t0)
                assert answer.status_code == 200, answer.status_code
                t0 = time.perf_counter()
                answer = await http.get("/console/api/overview")
                json_s.append(time.perf_counter() - t0)
                assert answer.status_code == 200
            body = answer.json()
    full: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        writer.execute("SELECT embedding_status, count(*) FROM ai.context_ai_state GROUP BY 1 "
                       "UNION ALL SELECT keyword_status, count(*) FROM ai.context_ai_state "
                       "GROUP BY 1").fetchall()
        full.append(time.perf_counter() - t0)
    truth = dict(writer.execute("SELECT keyword_status, count(*) FROM ai.context_ai_state "
                                "GROUP BY 1").fetchall())
    shown = {k: v for k, v in body["rows"]["keyword"].items() if v}
    from pinlog.db.sql import Queries

    console_q = Queries("pinlog.console", "console.sql")
    plans = {}
    since = int(time.time()) // 60 * 60 - 60
    for name, params in (("failure_reasons", {"limit": 8}), ("finished_per_minute", {"since": since})):
        sql = console_q.sql(name)
        for key, value in params.items():
            sql = sql.replace(f":{key}", str(value))
        plans[name] = "\n".join(r[0] for r in writer.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql))
    writer.close()
    return {"total": total, "rounds": rounds, "page": page_s, "json": json_s,
            "full_count": full, "counts_equal": shown == truth, "plans": plans}


def summary(result: dict[str, Any]) -> str:
    ms = 1000.0
    lines = [f"state rows: {result['total']:,}; {result['rounds']} renders each, 50 status "
             "changes between renders; counts equal a full count: "
             f"{result['counts_equal']}",
             "| what | p50 (ms) | p95 (ms) | max (ms) |", "|---|---|---|---|"]
    for key, label in (("page", "GET /console (HTML)"), ("json", "GET /console/api/overview"),
                       ("full_count", "full count per stage × status (what the summary replaces)")):
        v = result[key]
        lines.append(f"| {label} | {statistics.median(v) * ms:.1f} | {pct(v, 0.95) * ms:.1f} | "
                     f"{max(v) * ms:.1f} |")
    return "\n".join(lines)


def main() -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    from scratch_db import scratch_database

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with scratch_database() as url:
        t0 = time.perf_counter()
        populate(url, args.total)
        print(f"populated {args.total:,} state rows in {time.perf_counter() - t0:.0f} s", flush=True)
        result = asyncio.run(measure(url, args.rounds, args.total))
    print(summary(result))
    for name, plan in result["plans"].items():
        print(f"\nEXPLAIN ANALYZE {name}:\n{plan}")
    return 0 if result["counts_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
