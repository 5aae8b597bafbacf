"""RSS of a real `pinlog serve` under oversized request bodies (issue 27 #1).

Starts `pinlog serve` (real PostgreSQL, the default local model) and records its resident memory
(psutil RSS) when ready and after one search, then after each of: one ``POST /v1/search`` of
``--mb`` MB with ``Content-Length`` (no token), the same body chunked (no length, no token),
four such bodies in parallel (``--parallel-mb`` each), and ``curl -T`` of a ``--mb`` MB file
(what a client sees: curl asks ``Expect: 100-continue`` first). Prints one line per step: status
(httpx reports ``ReadError``/``WriteError`` when the server answered and closed the connection
while the client was still sending), seconds to the answer, RSS in MB. Run it on a checkout without the limit (``--src`` another
tree's ``src``) to see the difference.

    .venv/bin/python bench/body_limit_rss.py [--mb 300] [--parallel-mb 126] [--src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch_db import scratch_database  # noqa: E402
from serve_harness import Serve, free_port, make_member, run_pinlog, serve_env, token_for  # noqa: E402

MB = 1024 * 1024
CHUNK = 64 * 1024


async def body(total: int):  # noqa: ANN201 - an async generator of bytes
    sent = 0
    chunk = b"a" * CHUNK
    while sent < total:
        yield chunk
        sent += CHUNK


async def post(url: str, total: int, *, declared: bool) -> tuple[int | str, float]:
    headers = {"Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(total // CHUNK * CHUNK + (CHUNK if total % CHUNK else 0))
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=600) as client:
            r = await client.post(f"{url}/v1/search", content=body(total), headers=headers)
        status: int | str = r.status_code
    except httpx.HTTPError as exc:  # the server closed the connection after its 413
        status = type(exc).__name__
    return status, time.monotonic() - started


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / MB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--parallel-mb", type=int, default=126)
    parser.add_argument("--src", help="PYTHONPATH for the server (another checkout's src)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pinlog-rss-"))
    with scratch_database() as db_url:
        extra = {"PYTHONPATH": args.src} if args.src else {}
        env = serve_env(db_url, work / "data", free_port(), **extra)
        run_pinlog(["presets", "load"], env)
        token = token_for(db_url, make_member(db_url, "rss"))
        server = Serve(env, work / "serve.log")
        try:
            server.wait_ready()
            pid = server.proc.pid
            print(f"ready: rss {rss_mb(pid):.0f} MB")
            r = httpx.post(f"{server.url}/v1/search", json={"query": "조용한 카페"},
                           headers={"Authorization": f"Bearer {token}"}, timeout=60)
            print(f"one search ({r.status_code}): rss {rss_mb(pid):.0f} MB")
            for label, declared in (("Content-Length", True), ("chunked", False)):
                status, seconds = asyncio.run(post(server.url, args.mb * MB, declared=declared))
                print(f"{args.mb} MB body, {label}, no token: {status} in {seconds:.2f} s; "
                      f"rss {rss_mb(pid):.0f} MB")

            async def parallel() -> list[tuple[int | str, float]]:
                return await asyncio.gather(*(post(server.url, args.parallel_mb * MB,
                                                   declared=True) for _ in range(4)))

            peak = 0.0
            results: list[tuple[int | str, float]] = []

            async def watch() -> None:
                nonlocal peak, results
                task = asyncio.ensure_future(parallel())
                while not task.done():
                    peak = max(peak, rss_mb(pid))
                    await asyncio.sleep(0.05)
                results = task.result()

            asyncio.run(watch())
            print(f"4 × {args.parallel_mb} MB in parallel: {[s for s, _ in results]} in "
                  f"{max(t for _, t in results):.2f} s; peak rss {peak:.0f} MB, after "
                  f"{rss_mb(pid):.0f} MB")
            big = work / "big.json"
            with big.open("wb") as fh:  # what a client such as curl sees (it streams the file)
                fh.truncate(args.mb * MB)
            curl = subprocess.run(["curl", "-sS", "-X", "POST", "-T", str(big), "-o", "/dev/null",
                                   "-w", "%{http_code} %{size_upload}", "-H",
                                   "Content-Type: application/json", f"{server.url}/v1/search"],
                                  capture_output=True, text=True, timeout=600)
            code, uploaded = (curl.stdout.split() + ["?", "?"])[:2]
            print(f"curl -T {args.mb} MB file: HTTP {code}, {uploaded} bytes uploaded; "
                  f"rss {rss_mb(pid):.0f} MB")
            big.unlink()
            alive = httpx.get(f"{server.url}/health", timeout=10).status_code
            print(f"afterwards /health {alive}")
        finally:
            server.terminate()
    os.environ.pop("PYTHONPATH", None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
