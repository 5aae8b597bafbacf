"""What backends of the test database wait for and hold (``pg_locks``): lock-ordering tests
observe the server's lock table instead of sleeping (the migration and adoption locks)."""

from __future__ import annotations

import psycopg


def waiting_for_advisory_lock(conn: psycopg.Connection) -> list[int]:
    """Pids of the backends of ``conn``'s database waiting for an advisory lock (e.g. the
    migration lock), in pid order. Other databases of a shared test server are ignored."""
    return [pid for (pid,) in conn.execute(
        "SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
        "WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database() "
        "ORDER BY l.pid")]


def relation_locks(conn: psycopg.Connection, pids: list[int]) -> list[tuple[int, str, str]]:
    """``(pid, relation, mode)`` of every table/index lock ``pids`` hold."""
    return conn.execute(
        "SELECT pid, relation::regclass::text, mode FROM pg_locks "
        "WHERE pid = ANY(%s) AND locktype = 'relation' AND granted ORDER BY 1, 2", (pids,)
    ).fetchall()


def waiting_for_relation(conn: psycopg.Connection, relation: str) -> list[int]:
    """Pids of the backends waiting for a lock on ``relation`` (e.g. ``ai.keyword_preset``), in
    pid order: a migration waiting for its table lock, and the queries queued behind it."""
    return [pid for (pid,) in conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
        "AND relation = to_regclass(%s) ORDER BY pid", (relation,))]
