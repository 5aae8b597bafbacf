"""A scratch database for a benchmark: migrated, dropped afterwards (not a benchmark itself)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from pinlog.db import migrate
from pinlog.db.embedded import EmbeddedDatabase


@contextmanager
def scratch_database() -> Iterator[str]:
    """Yield the libpq URL of a fresh, migrated database; drop it (and stop the embedded server
    started for it, removing its directory) on exit. Uses ``PINLOG_TEST_DATABASE_URL``'s server when set, else an
    embedded server in a temporary directory."""
    server, directory = None, None
    base = os.environ.get("PINLOG_TEST_DATABASE_URL")
    if not base:
        directory = Path(tempfile.mkdtemp(prefix="pinlog-bench-"))
        server = EmbeddedDatabase(directory)
        server.start()
        base = server.url("postgres")
    name = f"pinlog_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = make_url(base).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        yield url
    finally:
        try:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            if server is not None:
                server.stop()
            if directory is not None:  # the server's files (about 1 GB after a search bench)
                shutil.rmtree(directory, ignore_errors=True)
