"""Fuzz the HTTP API with schemathesis (issue 13 item 9): every operation of `/v1/*` and
`/internal/v1/*` in the OpenAPI schema of a real `pinlog serve` (real PostgreSQL; model: the
counting fake of bench/fake_model.py), once with valid credentials (member token + internal
secret) and once with invalid ones. Checks: no 5xx anywhere (schemathesis
``not_a_server_error``); with invalid credentials, no state change (row counts of every core.*
and ai.* table, and the model calls, identical before and after).

`DELETE /v1/me` is left out of the valid run (it withdraws the member, after which every request
would only test the 401 path); the invalid run covers it. Needs schemathesis: `.venv/bin/pip install schemathesis`
(or ``--schemathesis PATH`` to a schemathesis installed elsewhere).

Then the HTTP edge (issue 27 #1, #2, #4), by raw requests on every path of the schema (path
parameters filled in) with both credential sets: **oversized bodies** — a ``Content-Length``
just over the route's limit and a chunked body of several MB, for every method — must answer
413 in the envelope ``{"error", "message"}`` (or another 4xx for a method the route lacks),
never a 5xx, with the server's RSS not growing by more than a few MB; **odd methods** (made-up
tokens, ``TRACE``, ``PROPFIND``, lower-case-looking ones…) must answer 4xx in the envelope, and
the ``pinlog_http_*`` series of ``/metrics`` must not grow with them; no state change.

    .venv/bin/python bench/fuzz_api.py [--max-examples 25] [--seed 1] [--schemathesis PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_model import CountingModel  # noqa: E402
from scratch_db import scratch_database  # noqa: E402
from serve_harness import (  # noqa: E402
    SECRET,
    Serve,
    free_port,
    make_member,
    run_pinlog,
    serve_env,
    token_for,
)

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))


def snapshot(db_url: str) -> dict[str, int]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        tables = [t for (t,) in conn.execute(
            "SELECT schemaname || '.' || tablename FROM pg_tables "
            "WHERE schemaname IN ('core', 'ai') ORDER BY 1")]
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        counts["ai.context_ai_state(updated)"] = conn.execute(
            "SELECT coalesce(sum(extract(epoch FROM updated_at)), 0)::bigint "
            "FROM ai.context_ai_state").fetchone()[0]
    return counts


def fuzz(url: str, headers: list[str], args: argparse.Namespace, *extra: str) -> tuple[int, str]:
    command = [args.schemathesis, "run", f"{url}/openapi.json", "--checks", "not_a_server_error",
               "--max-examples", str(args.max_examples), "--seed", str(args.seed),
               "--request-timeout", "15", "--workers", "1", "--include-path-regex",
               "^/(v1|internal/v1)/", "--suppress-health-check", "all", *extra]
    for header in headers:
        command += ["-H", header]
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    return result.returncode, result.stdout


def failures(output: str) -> str:
    """The FAILURES section (what failed and how to reproduce it), if any."""
    lines = output.strip().splitlines()
    start = next((i for i, line in enumerate(lines) if "FAILURES" in line), None)
    end = next((i for i, line in enumerate(lines) if "SUMMARY" in line), len(lines))
    return "\n".join(lines[start:end]) + "\n" if start is not None else ""


def summary(output: str) -> str:
    lines = output.strip().splitlines()
    start = max((i for i, line in enumerate(lines) if "SUMMARY" in line), default=len(lines) - 15)
    return "\n".join(lines[start:])


#: Request-body limits of the app with default settings (README "Public API"), bytes.
SEARCH_LIMIT, DEFAULT_LIMIT = 16 * 1024, 64 * 1024
ODD_METHODS = ["TRACE", "PROPFIND", "MKCOL", "M-SEARCH", "PURGE", "LINK", "X" * 64, "GET2"]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def concrete_paths(url: str) -> list[str]:
    """Every path of the served schema with its parameters filled in (an id, a public id)."""
    schema = httpx.get(f"{url}/openapi.json", timeout=30).json()
    out = []
    for template in schema["paths"]:
        out.append(re.sub(r"\{(\w+)\}", lambda m: "pr_" + "A" * 32 if "public" in m.group(1)
                          else "1", template))
    return sorted(out) + ["/no/such/route", "/v1/records/1/nope"]


def is_envelope(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return False
    return (isinstance(body, dict) and isinstance(body.get("error"), str)
            and isinstance(body.get("message"), str) and "detail" not in body)


def http_series(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(1 for line in text.splitlines() if line.startswith("pinlog_http_"))


def edge(url: str, pid: int, credentials: dict[str, dict[str, str]], seed: int) -> list[str]:
    """The HTTP-edge probes (module docstring); returns the problems found (empty = ok)."""
    problems: list[str] = []
    paths = concrete_paths(url)
    rss_before = psutil.Process(pid).memory_info().rss
    counts = {"oversized": 0, "odd": 0}

    def check(method: str, path: str, r: httpx.Response, allowed: set[int]) -> None:
        if r.status_code >= 500 or r.status_code not in allowed:
            problems.append(f"{method} {path}: {r.status_code} {r.text[:120]}")
        elif method != "HEAD" and r.status_code >= 400 and not is_envelope(r):
            problems.append(f"{method} {path}: {r.status_code} not in the envelope: {r.text[:120]}")

    def chunks(total: int):  # noqa: ANN202 - a generator of exactly ``total`` bytes
        sent = 0
        while sent < total:
            size = min(65536, total - sent)
            yield b"a" * size
            sent += size

    with httpx.Client(base_url=url, timeout=60) as client:
        for label, headers in credentials.items():
            for path in paths:
                for method in ("POST", "PUT", "PATCH", "DELETE"):
                    limit = SEARCH_LIMIT if (method, path) == ("POST", "/v1/search") \
                        else DEFAULT_LIMIT
                    if (method, path, label) == ("DELETE", "/v1/me", "valid credentials"):
                        continue  # a body the route never reads: it would withdraw the member
                    declared = {**headers, "Content-Type": "application/json",
                                "Content-Length": str(limit + 1)}
                    try:
                        r = client.request(method, path, headers=declared, content=chunks(limit + 1))
                        check(method, path, r, {413})
                    except httpx.TransportError:  # closed after its 413, while we still sent
                        pass
                    try:  # a route that reads no body never reads it: any 4xx, no 5xx
                        r = client.request(method, path, content=chunks(4 * 1024 * 1024),
                                           headers={**headers, "Content-Type": "application/json"})
                        check(method, path, r, {413, 401, 404, 405, 410, 422, 200, 204})
                    except httpx.TransportError:
                        pass
                    counts["oversized"] += 2
            print(f"oversized bodies ({label}): {len(paths)} paths × 4 methods × 2 ways")
        warm = http_series(url)
        rng = random.Random(seed)
        for headers in credentials.values():
            for path in paths:
                for method in ODD_METHODS + ["Z" + "".join(rng.choices(string.ascii_uppercase, k=8))
                                             for _ in range(3)]:
                    r = client.request(method, path, headers=headers)
                    check(method, path, r, {400, 401, 404, 405, 422})
                    counts["odd"] += 1
        grown = http_series(url) - warm
        # every (route, 'other', status) series may appear once; made-up methods add nothing
        again = http_series(url)
        for path in paths:
            for _ in range(5):
                client.request("Z" + "".join(rng.choices(string.ascii_uppercase, k=8)), path)
        if http_series(url) != again:
            problems.append(f"made-up methods added {http_series(url) - again} metric series")
        print(f"odd methods: {counts['odd']} requests, first pass added {grown} series "
              f"(route × 'other' × status, once each); a second pass of {len(paths) * 5} "
              f"made-up methods added {http_series(url) - again}")
    rss_after = psutil.Process(pid).memory_info().rss
    grew = (rss_after - rss_before) / 1024 / 1024
    print(f"server RSS {rss_before / 2**20:.0f} MB before the edge probes, "
          f"{rss_after / 2**20:.0f} MB after ({grew:+.0f} MB, {counts['oversized']} oversized bodies)")
    if grew > 64:
        problems.append(f"RSS grew by {grew:.0f} MB under oversized bodies")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schemathesis", default=SCHEMATHESIS,
                        help="the schemathesis executable (default: next to this Python)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pinlog-fuzz-"))
    model = CountingModel().start()
    failed = False
    try:
        with scratch_database() as db_url:
            env = serve_env(db_url, work / "data", free_port(), **model.env(),
                            PINLOG_EMBEDDING_TIMEOUT="5", PINLOG_LLM_TIMEOUT="5")
            run_pinlog(["presets", "load"], env)
            token = token_for(db_url, make_member(db_url, "fuzz"))
            server = Serve(env, work / "serve.log")
            server.wait_ready()
            try:
                rc, out = fuzz(server.url, [f"Authorization: Bearer {token}",
                                            f"X-Internal-Secret: {SECRET}"], args,
                               "--exclude-operation-id", "withdraw_v1_me_delete")
                print("== valid credentials (DELETE /v1/me left out) ==")
                print(failures(out) + summary(out))
                failed |= rc != 0
                before, calls_before = snapshot(db_url), (sum(model.embedded.values()),
                                                          sum(model.judged.values()))
                rc3, out3 = fuzz(server.url, ["Authorization: Bearer not-a-valid-token",
                                              "X-Internal-Secret: wrong-secret-0123456789"], args)
                after, calls_after = snapshot(db_url), (sum(model.embedded.values()),
                                                        sum(model.judged.values()))
                print("== invalid credentials ==")
                print(failures(out3) + summary(out3))
                changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
                print(f"state change on rejected requests: "
                      f"{changed or 'none'}; model calls before/after {calls_before}/{calls_after}")
                failed |= rc3 != 0 or bool(changed) or calls_before != calls_after
                before = snapshot(db_url)
                edge_problems = edge(server.url, server.proc.pid, {
                    "valid credentials": {"Authorization": f"Bearer {token}",
                                          "X-Internal-Secret": SECRET},
                    "invalid credentials": {"Authorization": "Bearer not-a-valid-token",
                                            "X-Internal-Secret": "wrong-secret-0123456789"}},
                    args.seed)
                after = snapshot(db_url)
                changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
                print("== HTTP edge (oversized bodies, odd methods) ==")
                print("\n".join(edge_problems[:20]) or "no problem found")
                print(f"state change during the edge probes: {changed or 'none'}")
                failed |= bool(edge_problems) or bool(changed)
                log = (work / "serve.log").read_text()
                print(f"server log: {log.count('unhandled error')} unhandled error(s)")
            finally:
                server.terminate()
    finally:
        model.stop()
    print("RESULT:", "FAILED" if failed else "OK (no 5xx, no state change on rejected requests)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
