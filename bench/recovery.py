"""Backlog drain time after a crash (issue 13 item 1, SPEC §7.2 "Recovery speed").

Imports N contexts (default 300) into a real `pinlog serve` (default model, real PostgreSQL),
SIGKILLs it right after the last POST answered (the backlog is whatever was not final then),
restarts it at once and measures how long after the restart every context is final.

The interval stays at its 5-minute default; the expiries are shortened (``--pending-expiry``,
``--processing-expiry``) so the run is short — the target is *final within expiry + 60 s of the
restart* (the PROCESSING expiry is the longer one a crashed stage waits for).

    .venv/bin/python bench/recovery.py [--contexts 300] [--pending-expiry 30] [--processing-expiry 60]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import scratch_database  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=300)
    parser.add_argument("--pending-expiry", type=int, default=30)
    parser.add_argument("--processing-expiry", type=int, default=60)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pinlog-recovery-"))
    with scratch_database() as db_url:
        env = serve_env(db_url, work / "data", free_port(),
                        PINLOG_PENDING_EXPIRY=str(args.pending_expiry),
                        PINLOG_PROCESSING_EXPIRY=str(args.processing_expiry),
                        # budget rule (SPEC §6) with a 60 s PROCESSING expiry
                        PINLOG_EMBEDDING_TIMEOUT="10", PINLOG_LLM_TIMEOUT="10")
        run_pinlog(["presets", "load"], env)
        token = token_for(db_url, make_member(db_url, "recovery"))
        first = Serve(env, work / "serve.log")
        first.wait_ready()
        ids = asyncio.run(post_records(first.url, token, note_texts(args.contexts)))
        first.kill()
        backlog = unfinished(db_url, ids)
        restarted = time.monotonic()
        second = Serve(env, work / "serve.log")
        ready = second.wait_ready()
        while unfinished(db_url, ids):
            time.sleep(0.5)
        drained = time.monotonic() - restarted
        second.terminate()
        target = max(args.pending_expiry, args.processing_expiry) + 60
        print(f"contexts {len(ids)}; backlog after SIGKILL {backlog} not final; interval 300 s "
              f"(default); PENDING expiry {args.pending_expiry} s, PROCESSING expiry "
              f"{args.processing_expiry} s; restart ready in {ready:.1f} s; all final "
              f"{drained:.1f} s after the restart (target: expiry + 60 s = {target} s) → "
              f"{'OK' if drained <= target else 'MISSED'}")
        return 0 if drained <= target else 1


if __name__ == "__main__":
    raise SystemExit(main())
