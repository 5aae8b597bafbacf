"""Test helpers for subprocess-level tests (real `pinlog` commands)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

PINLOG = [sys.executable, "-m", "pinlog"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinlog_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for a `pinlog` subprocess: no inherited PINLOG_* except what is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINLOG_")}
    env["PINLOG_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def run_pinlog(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(PINLOG + args, env=env, capture_output=True, text=True, timeout=timeout)


def wait_http(url: str, proc: subprocess.Popen | None = None, timeout: float = 60) -> httpx.Response:
    """Poll ``url`` until it answers (a subprocess starting up has no other signal to wait on)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            return httpx.get(url, timeout=2)
        except httpx.HTTPError as exc:
            last = exc
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer: {last}")
