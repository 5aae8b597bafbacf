"""Fuzz the HTTP API with schemathesis (issue 13 item 9): every operation of `/v1/*` and
`/internal/v1/*` in the OpenAPI schema of a real `pinlog serve` (real PostgreSQL; model: the
counting fake of bench/fake_model.py), once with valid credentials (member token + internal
secret) and once with invalid ones. Checks: no 5xx anywhere (schemathesis
``not_a_server_error``); with invalid credentials, no state change (row counts of every core.*
and ai.* table, and the model calls, identical before and after).

`DELETE /v1/me` is left out of the valid run (it withdraws the member, after which every request
would only test the 401 path); the invalid run covers it. Needs schemathesis: `.venv/bin/pip install schemathesis`.

    .venv/bin/python bench/fuzz_api.py [--max-examples 25] [--seed 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

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
    command = [SCHEMATHESIS, "run", f"{url}/openapi.json", "--checks", "not_a_server_error",
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
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
