"""Processes and owner records for the owner-rule tests (SPEC §7.3.1), in plain SQL on the real
PostgreSQL.

Time is never waited for: a process's heartbeat lease (``ai.process_settings.alive_until``) is
moved with the database clock — a live owner's far into the future, a gone owner's into the
past — exactly as a crash (no heartbeat for the timeout) or a clean stop (lease ended) leaves it.
"""

from __future__ import annotations

import uuid

import psycopg

#: Seconds a "live" test process's lease runs: far longer than any test takes.
LIVE_LEASE_S = 3600


def add_process(conn: psycopg.Connection, *, live: bool = True, components: str = "core,ai") -> str:
    """Record a process in ``ai.process_settings`` (as its registry would) and return its id:
    ``live`` → its lease runs for an hour; else it ended a second ago (the process is gone)."""
    process_id = uuid.uuid4().hex
    conn.execute(
        "INSERT INTO ai.process_settings (process_id, host, pid, components, settings, alive_until)"
        " VALUES (%s, 'test-host', 1, %s, '{}', now() + make_interval(secs => %s))",
        (process_id, components, LIVE_LEASE_S if live else -1))
    return process_id


def end_lease(conn: psycopg.Connection, process_id: str) -> None:
    """The process is gone from now on (its lease ended: a crash after the heartbeat timeout, or
    a clean stop)."""
    conn.execute("UPDATE ai.process_settings SET alive_until = now() - interval '1 second' "
                 "WHERE process_id = %s", (process_id,))


def extend_lease(conn: psycopg.Connection, process_id: str) -> None:
    """The process heartbeats (its lease runs for another hour)."""
    conn.execute("UPDATE ai.process_settings SET alive_until = now() + make_interval(secs => %s) "
                 "WHERE process_id = %s", (LIVE_LEASE_S, process_id))


def set_owner(conn: psycopg.Connection, context_id: int, owner: str | None) -> None:
    """Record ``owner`` as the row's owner as a writer would: ``owned_at`` = the row's rescan
    age (its last status change or claim), so the record counts."""
    conn.execute("UPDATE ai.context_ai_state SET owner = %s, "
                 "owned_at = greatest(updated_at, coalesce(rescanned_at, updated_at)) "
                 "WHERE context_id = %s", (owner, context_id))


def owner_of(conn: psycopg.Connection, context_id: int) -> tuple[str | None, object]:
    """``(owner, owned_at)`` of a state row."""
    row = conn.execute("SELECT owner, owned_at FROM ai.context_ai_state WHERE context_id = %s",
                       (context_id,)).fetchone()
    assert row is not None, f"no state row {context_id}"
    return row[0], row[1]
