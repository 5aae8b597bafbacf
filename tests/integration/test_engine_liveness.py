"""The pool hands out live connections with a round trip only when one may be dead
(``pinlog.db.engine.watch_idle_connections``, issue 25: the pre-ping's ``SELECT 1`` before every
checkout was about a tenth of the batch path's CPU). Real PostgreSQL; the idle time is moved by
the engine's clock hook, the server closes a connection through ``pg_terminate_backend``."""

from __future__ import annotations

import select

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.db.engine import PING_AFTER_IDLE, create_engine


class Clock:
    """The engine's monotonic clock, moved by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def pings(monkeypatch: pytest.MonkeyPatch, migrated_db_url: str, clock: Clock):
    """``(engine, calls)``: a one-connection engine on ``clock`` whose pings are counted."""
    engine = create_engine(migrated_db_url, pool_size=1, clock=clock)
    dialect = engine.sync_engine.dialect
    calls: list[object] = []
    ping = dialect.do_ping

    def counted(dbapi_connection: object) -> bool:
        calls.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counted)
    try:
        yield engine, calls
    finally:
        await engine.dispose()


async def backend(engine: AsyncEngine) -> tuple[int, int]:
    """``(backend pid, socket fd)`` of the pooled connection a checkout gets."""
    async with engine.connect() as conn:
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        raw = await conn.get_raw_connection()
        return int(pid), raw.driver_connection.pgconn.socket


async def test_a_connection_used_moments_ago_is_not_pinged_one_idle_long_enough_is(pings, clock):
    engine, calls = pings
    first, _ = await backend(engine)
    assert calls == []  # just opened: nothing to check
    for _ in range(3):
        clock.now += PING_AFTER_IDLE / 2  # back in the pool for less than the idle time
        assert (await backend(engine))[0] == first
    assert calls == []

    clock.now += PING_AFTER_IDLE
    assert (await backend(engine))[0] == first  # pinged, alive: the same connection
    assert len(calls) == 1


async def test_a_connection_the_server_closed_is_replaced_before_it_is_used(pings, clock,
                                                                         migrated_db_url):
    engine, calls = pings
    pid, fd = await backend(engine)
    with psycopg.connect(migrated_db_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    # the event itself, not a time margin: the pooled connection's socket reports the close
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    assert poller.poll(30_000), "the server did not close the terminated connection"

    # no time has passed on the engine's clock: only the socket says the connection is dead
    replacement, _ = await backend(engine)
    assert replacement != pid
    assert len(calls) == 1  # the one ping that found it closed; the new connection is not pinged
