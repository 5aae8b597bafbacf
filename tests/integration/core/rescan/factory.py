"""Rows and a recording process client for the rescan tests (plain SQL, a real PostgreSQL).

Time is simulated by moving ``updated_at`` / ``rescanned_at`` into the past (SPEC §7.3 uses the
database clock, so the tests move the rows, never the clock).
"""

from __future__ import annotations

import asyncio
import itertools

import psycopg

from pinlog.contracts import ProcessRequest

_place_seq = itertools.count(1)


def make_member(conn: psycopg.Connection) -> int:
    return conn.execute("INSERT INTO core.member (external_ref) VALUES (NULL) RETURNING id").fetchone()[0]


def make_context(
    conn: psycopg.Connection,
    *,
    member_id: int | None = None,
    body: str = "조용한 카페, 부모님과 함께",
    emb: str = "PENDING",
    kw: str = "PENDING",
    retry: int = 0,
    age_s: float = 0,
    rescanned_age_s: float | None = None,
    last_error: str | None = None,
) -> int:
    """Insert member (unless given), place, record, context and its state row; return the id.

    ``age_s``: seconds ``updated_at`` lies in the past; ``rescanned_age_s``: same for
    ``rescanned_at`` (None → NULL).
    """
    if member_id is None:
        member_id = make_member(conn)
    n = next(_place_seq)
    place_id = conn.execute(
        "INSERT INTO core.place (external_place_id, name, lat, lng) VALUES (%s, %s, 37.5, 127.0) "
        "ON CONFLICT (external_place_id) DO UPDATE SET name = excluded.name RETURNING id",
        (f"p-{n}-{member_id}", f"place {n}"),
    ).fetchone()[0]
    record_id = conn.execute(
        "INSERT INTO core.record (member_id, place_id) VALUES (%s, %s) RETURNING id",
        (member_id, place_id),
    ).fetchone()[0]
    context_id = conn.execute(
        "INSERT INTO core.context (record_id, member_id, body) VALUES (%s, %s, %s) RETURNING id",
        (record_id, member_id, body),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, retry_count,"
        " updated_at, rescanned_at, last_error) VALUES (%s, %s, %s, %s,"
        " now() - make_interval(secs => %s),"
        " CASE WHEN %s::float8 IS NULL THEN NULL ELSE now() - make_interval(secs => %s) END, %s)",
        (context_id, emb, kw, retry, age_s, rescanned_age_s, rescanned_age_s or 0, last_error),
    )
    return context_id


def state(conn: psycopg.Connection, context_id: int) -> dict:
    cur = conn.execute(
        "SELECT embedding_status, keyword_status, retry_count, last_error,"
        " updated_at, rescanned_at FROM ai.context_ai_state WHERE context_id = %s",
        (context_id,),
    )
    names = [d.name for d in cur.description]
    row = cur.fetchone()
    return dict(zip(names, row, strict=True)) if row else {}


def events(conn: psycopg.Connection, context_id: int) -> list[tuple]:
    return conn.execute(
        "SELECT stage, from_status, to_status, actor, reason FROM ai.context_ai_event "
        "WHERE context_id = %s ORDER BY id", (context_id,),
    ).fetchall()


def delete_context(conn: psycopg.Connection, context_id: int, *, cancel: bool = True) -> None:
    """What core does on delete (soft delete + both stages CANCELLED), optionally without the
    invalidation (to simulate a missed one)."""
    conn.execute("UPDATE core.context SET deleted_at = now() WHERE id = %s", (context_id,))
    if cancel:
        conn.execute(
            "UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
            "keyword_status = 'CANCELLED', updated_at = now() WHERE context_id = %s",
            (context_id,),
        )


class RecordingClient:
    """A ProcessClient standing in for the ai side at the contract: records each request and
    answers ``status`` (202 by default; 503, 0 = no answer …), or raises ``error`` if set.

    ``gate``: when set, every send waits on it (after being recorded), so a test can hold calls.
    """

    def __init__(self, status: int = 202, error: Exception | None = None) -> None:
        self.status = status
        self.error = error
        self.requests: list[ProcessRequest] = []
        self.gate: asyncio.Event | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def ids(self) -> list[int]:
        return [r.context_id for r in self.requests]

    async def send(self, request: ProcessRequest) -> int:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            else:
                await asyncio.sleep(0)
            if self.error is not None:
                raise self.error
            return self.status
        finally:
            self.in_flight -= 1


class RecordingBatchClient(RecordingClient):
    """A :class:`pinlog.contracts.BatchProcessClient` at the contract: ``send_batch`` records
    each call's requests (``batches``) and answers ``answer(request, attempt)`` per request
    (attempt 1 = its first send; default ``status``)."""

    def __init__(self, status: int = 202, answer=None) -> None:
        super().__init__(status)
        self.batches: list[list[ProcessRequest]] = []
        self.answer = answer
        self._attempts: dict[int, int] = {}

    async def send_batch(self, requests):
        self.batches.append(list(requests))
        self.requests.extend(requests)
        await asyncio.sleep(0)
        out = []
        for request in requests:
            attempt = self._attempts[request.context_id] = self._attempts.get(
                request.context_id, 0) + 1
            out.append(self.answer(request, attempt) if self.answer else self.status)
        return out
